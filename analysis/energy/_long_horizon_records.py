"""The typed results of the long-horizon studies: `long_horizon` (a `LongHorizon`, a
`LongHorizonFlow` per flow) and `finite_time_lyapunov` (a `FiniteTimeLyapunov`, also each
flow's `lyapunov`).

Every record is also a read-only mapping of its keys (`result["times"] is result.times`),
with the keys the dicts had; `long_horizon_findings` and the figure read either.
"""

import dataclasses

import diffrax
import numpy as np

from .._results import Result


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FiniteTimeLyapunov(Result):
    """The result of `finite_time_lyapunov`: the growth of small perturbations of one
    state over several horizons (float64), per random tangent direction."""

    horizons: np.ndarray
    """`[H]`: the horizons, ascending (tau units)."""
    exponents: np.ndarray
    """`[directions, H]`: `log(|d(T)| / |d(0)|) / T` per direction and horizon (1/tau;
    negative: the perturbation shrinks)."""
    median: np.ndarray
    """`[H]`: their median over directions."""
    max: np.ndarray
    """`[H]`: their largest."""
    flow: str
    """The flow that was integrated."""
    directions: int
    """The number of random directions."""
    segment: float
    """The longest piece between renormalisations (tau units)."""
    seed: int
    """The seed of the directions."""
    solver: str | diffrax.AbstractSolver
    """The `solvers.solve` solver (its name, or its `str` read back from JSON)."""
    rtol: float | None
    """Its relative tolerance."""
    atol: float | None
    """Its absolute tolerance."""
    coordinates: str
    """What a perturbation is measured in: `"g"` (the energy's coordinates, a model with
    `energy_coordinates`) or `"x"`."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LongHorizonFlow(Result):
    """One flow of a `long_horizon` result, recorded at its `T` times."""

    energy: np.ndarray
    """`[T]`: the energy `E`."""
    residual_rms: np.ndarray
    """`[T]`: RMS G (the residual's RMS over its `N D` entries; zero exactly at fixed
    points)."""
    error: np.ndarray
    """`[T]`: `error_fn` of the state (`error_name`'s units; NaN without one)."""
    held: np.ndarray
    """`[T]`: whether the record is held, not integrated: a `hold_tol` fixed point, or
    after a failed solve (`max_steps`), where the later states are unknown (NaN)."""
    state_times: np.ndarray
    """`[T]`: the time each recorded state belongs to (a held record's is `t_hold`)."""
    scales_median: np.ndarray | None
    """`[T]`: the median token scale `s_A` over tokens (None for a model without
    `token_scales`)."""
    scales_min: np.ndarray | None
    """`[T]`: the smallest token scale (None without token scales)."""
    scales_max: np.ndarray | None
    """`[T]`: the largest token scale (None without token scales)."""
    x_end: np.ndarray
    """`[N, D]`: the state at the last time."""
    t_hold: float | None
    """Where a `hold_tol` stop began (tau units); else None."""
    segments: dict
    """Per recorded interval: `t0`, `t1`, `accepted`, `rejected`, `nfe`, `mean_step` (the
    interval over its accepted steps), `stop_reason`, `switches` and `implicit`
    (stiffness switches and implicit-mode steps of a switching solver such as `"auto"`,
    None where the solver reports none)."""
    solver: str
    """The solver's name."""
    total_steps: int
    """Accepted and rejected steps over all intervals."""
    total_nfe: int
    """Vector-field evaluations over all intervals."""
    total_switches: int | None
    """Stiffness switches over all intervals (None where the solver reports none)."""
    scale_growth_per_tau: float | None
    """The slope of the median scale over the last decade (per tau; None without
    scales)."""
    t_fixed_point: float | None
    """When RMS G first fell below `fixed_point_atol` (metadata `fixed_point_tol`),
    interpolated linearly in log RMS G between the two records around it (tau units);
    None if it never did."""
    t_fixed_point_bracket: list[float] | np.ndarray | None
    """`[2]`: those two records' times (None without a crossing)."""
    fixed_point_stays: bool | None
    """Whether every later record stayed below `fixed_point_atol` (None without a
    crossing)."""
    decay: dict
    """The decay law of RMS G (`fit_decay_laws`): the chosen `law`, both fits and their
    residuals, the window, the `late` rate, or the `reason` none was fitted."""
    lyapunov: FiniteTimeLyapunov | None
    """Finite-time Lyapunov exponents of the end state (None with no horizons or a
    non-finite end state)."""
    energy_above_reference: np.ndarray
    """`[T]`: `E(t) - E_ref` (the result's `energy_reference`; NaN without one)."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LongHorizon(Result):
    """The result of `long_horizon`: each flow from one state far past the trained
    horizon, recorded at log-spaced times, one energy reference for all, and what it
    says in sentences."""

    times: np.ndarray
    """`[T]`: the record times, 0 and log-spaced to `t1` (tau units)."""
    flows: dict[str, LongHorizonFlow]
    """Per flow run (`"native"`, `"projected"`), its record."""
    energy_reference: dict
    """One reference for all flows (`energy_reference`): `value` (the lowest energy
    recorded), the `flow` and `time` it was recorded at, `at_fixed_point`, `label` (the
    reference in words)."""
    metadata: dict
    """What produced it (study, dtype, flows, solver per flow, tolerances, `t1`,
    `n_times`, `hold_tol`, `fixed_point_tol`, `fit_start`, `fit_floor`, `error`,
    `model_type`, `token_scales`, seeds, the Lyapunov horizons, versions)."""
    findings: list[str]
    """A few sentences per flow (`long_horizon_findings`)."""
