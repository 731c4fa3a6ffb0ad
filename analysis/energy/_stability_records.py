"""The typed results of the studies of fixed points: `stability` (a `Stability`, its
exponent a `StabilityLyapunov`), `lyapunov_exponent` (a `LyapunovExponent`) and
`fixed_points` (a `FixedPoints`).

Every record is also a read-only mapping of its keys (`result["x"] is result.x`), with
the keys the dicts had. The reports inside (`polish`, `kinks`, `sides`, `verdict`) stay
dicts.
"""

import dataclasses

import diffrax
import numpy as np

from .._results import Result, optional
from ..landscape import HessianSpectrum


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LyapunovExponent(Result):
    """The result of `lyapunov_exponent`: the finite-time Lyapunov exponent of a flow from
    one state, a tangent perturbation carried by the variational equation and
    renormalised after each of `segments` equal pieces of `[0, t1]` (float64)."""

    exponent: float
    """`sum(log growth) / t1` (1/tau)."""
    local: np.ndarray
    """`[segments]`: each piece's growth rate (1/tau)."""
    times: np.ndarray
    """`[segments]`: the pieces' ends (tau units)."""
    flow: str
    """The flow that was integrated."""
    t1: float
    """The horizon (tau units)."""
    segments: int
    """The number of pieces."""
    seed: int
    """The seed of the random perturbation."""
    solver: str | diffrax.AbstractSolver
    """The `solvers.solve` solver (its name, or its `str` read back from JSON)."""
    rtol: float | None
    """Its relative tolerance (None: constant steps of `dt0`)."""
    atol: float | None
    """Its absolute tolerance."""
    dt0: float | None
    """Its constant step (None: the solver's adaptive steps)."""
    coordinates: str
    """What the perturbation is measured in (`measure`): `"g"`, the energy's coordinates
    (`|C dx|`, `|dg|` on the ET), or `"metric"`, `|C^(1/2) dx|`."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class StabilityLyapunov(LyapunovExponent):
    """The Lyapunov exponent of a `Stability` result (measured in the metric, from the
    polished point), with the horizon it was cut from."""

    capped_from: float | None = None
    """The requested `lyapunov_time` where the point is unstable and the horizon was cut
    to the time the state takes to leave it (residual error grown to ~1e-3); else None."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Stability(HessianSpectrum):
    """The result of `stability`: the tangent Hessian's spectrum at the Newton-polished
    fixed point (the `HessianSpectrum` fields), how far the true critical point can be,
    the kinks within that reach, the Lyapunov exponent and the verdict that reconciles
    them."""

    x: np.ndarray
    """`[N, D]`: the polished point (float64)."""
    polish: dict
    """The Newton polish: `polished`, `residual_rms_before`, `residual_rms`, `converged`,
    `steps`, `linear`, `rounds` (each round's `method` and `residual_rms`),
    `displacement_rms` (in the energy's coordinates), `newton_start_residual_rms`,
    `newton_displacement`, `newton_jump_bound`, and `first_attempt_jumped` where the
    polish started again."""
    residual_rms: float
    """RMS G at the polished point."""
    distance_bound: float
    """`|G|_2 / min |lambda|`: how far the true critical point can be (the energy's
    coordinates)."""
    kinks: dict
    """The kinks of `E` within `KINK_REACH_FACTOR` times that distance: `declared`,
    `twice_differentiable`, `n_within`, `nearest`, `within`."""
    sides: dict | None
    """With kinks in reach, per side `"lower"`/`"upper"` the pinned Hessian's
    `smallest`, `largest`, `morse_index`, `morse_index_is_lower_bound`; else None."""
    morse_index_range: list[int] | np.ndarray
    """`[2]`: the fewest and most negative eigenvalues over the sides (the point's own
    index twice without kinks in reach)."""
    linear_rates: list[float] | np.ndarray
    """`[2]`: `[low, high]` of the linearised projected flow's growth rates (1/tau)."""
    rates_smallest: np.ndarray | None
    """`coordinates="x"`: `[k]`, `smallest / tau`, the slowest decay rates (1/tau); else
    None."""
    energy: float
    """`E` at the polished point."""
    lyapunov: StabilityLyapunov | None
    """The Lyapunov exponent of `flow` from the point (None with `lyapunov_time=None`)."""
    flow_eigenvalues: np.ndarray | None
    """Where the residual is no gradient (`asymmetry` above `GRADIENT_ASYMMETRY`): `[k]`,
    the eigenvalues of largest real part of the flow's Jacobian (complex; of `flow` on a
    flat model, of the projected flow in manifold coordinates otherwise,
    `flow_eigenvalues`); else None."""
    verdict: dict
    """The verdict (`analysis._verdict`): `code`, `sentence`, `called`,
    `lyapunov_range`, `lyapunov_consistent`."""
    flow: str
    """The flow whose Lyapunov exponent was measured."""
    tau: float
    """The model's time constant (1 without one)."""
    metadata: dict
    """What produced it (study, dtype, model type, seeds, flow, coordinates, method, `k`,
    the polish's settings, geometry, versions)."""
    smallest_magnitude: float | None = optional()
    """Where Lanczos' `morse_index` is a lower bound: `min |lambda|` over the spectrum
    (`smallest_eigenvalue_magnitude`), which the distance bound uses."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FixedPoints(Result):
    """The result of `fixed_points`: where `S` starts went on the projected flow, and
    whether they reached the same fixed point (compared in the energy's coordinates)."""

    labels: list[str]
    """`[S]`: a name per start."""
    x_star: np.ndarray
    """`[S, N, D]`: the end states (Newton-polished where asked)."""
    g_star: np.ndarray
    """`[S, N, D]`: them in the energy's coordinates (`g = LayerNorm(x)` on the ET)."""
    distances: np.ndarray
    """`[S, S]`: the RMS over the `N D` entries of `g_i* - g_j*`."""
    cluster: np.ndarray
    """`[S]`: connected components of `distances < distance_tol` (a label per start)."""
    n_distinct: int
    """The number of distinct fixed points (components)."""
    path_independence: float
    """The fraction of pairs of starts that reached the same fixed point (1 when all
    coincide, 0 when all differ)."""
    energy: np.ndarray
    """`[S]`: `E` at each end state."""
    residual_rms: np.ndarray
    """`[S]`: RMS G at each."""
    t_final: np.ndarray
    """`[S]`: where each start's solve stopped (tau units)."""
    stop_reason: list[str]
    """`[S]`: why it stopped."""
    converged: np.ndarray
    """`[S]`: `residual_rms <= fixed_point_atol` (the settings')."""
    newton_polished: np.ndarray
    """`[S]`: whether Newton converged near the end state (all True without polish)."""
    morse_index: np.ndarray | None
    """`morse_index=True`: `[S]`, the negative Hessian eigenvalues at each fixed point
    (`-1` where Newton did not polish it); else None."""
    metadata: dict
    """What produced it (study, dtype, seeds, flow, solver and tolerances, `t1`,
    `distance_tol`, `polish`, coordinates, versions)."""
