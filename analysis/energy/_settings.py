"""How the studies of an energy system solve and what else each is asked to do.

How: one `solvers.SolveOptions` per study, its default a module constant below holding
that study's defaults (a study's `options` argument; `options.replace(rtol=...)` for a
variant). Where a study follows several flows (`flows=`), each flow replaces
`options.flow`. An adaptive default keeps `dt0 = 0.1`, `solve`'s default, as its first
step: the studies always started there.

What else: one frozen, checked settings object per study (`analysis._settings.Settings`:
`replace(**changes)`, `to_json()`), every field documented in its class. The metadata of
each result keeps the keys it had (`tolerance`, `fixed_point_tol`, `polish`, ...).
"""

import dataclasses
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from jaxtyping import Array

from et_ode import solvers
from et_ode.vocab import FLOWS

from .._settings import NewtonSettings, Settings, at_least, polish_or_none, positive
from ..landscape import Method

# ------------------------------------------------------------------------- options

CONVERGENCE_OPTIONS = solvers.SolveOptions(
    solver="tsit5", dt0=0.1, rtol=1e-10, atol=1e-12, max_steps=100_000
)
"""`convergence`'s solves: tsit5 at rtol 1e-10, atol 1e-12 (first step 0.1), at most
100,000 steps per segment; each of its `flows` replaces the flow."""

LYAPUNOV_EXPONENT_OPTIONS = solvers.SolveOptions(
    solver="tsit5", dt0=0.1, rtol=1e-10, atol=1e-12, max_steps=20_000, flow="projected"
)
"""`lyapunov_exponent`'s solves (float64): tsit5 at rtol 1e-10, atol 1e-12 (first step
0.1), at most 20,000 steps per segment, the projected flow."""

STABILITY_OPTIONS = LYAPUNOV_EXPONENT_OPTIONS.replace()  # equal, its own name
"""`stability`'s: the flow whose Lyapunov exponent it measures and how that exponent is
solved (`LYAPUNOV_EXPONENT_OPTIONS`: the projected flow, tsit5 at rtol 1e-10)."""

FINITE_TIME_LYAPUNOV_OPTIONS = solvers.SolveOptions(
    solver="tsit5", dt0=0.1, rtol=1e-10, atol=1e-12, max_steps=100_000, flow="projected"
)
"""`finite_time_lyapunov`'s solves (float64): tsit5 at rtol 1e-10, atol 1e-12 (first
step 0.1), at most 100,000 steps per piece, the projected flow."""

LONG_HORIZON_OPTIONS: Mapping[str, solvers.SolveOptions] = MappingProxyType(
    {
        "native": solvers.SolveOptions(
            solver="tsit5", dt0=0.1, rtol=1e-4, atol=1e-6, max_steps=200_000
        ),
        "projected": solvers.SolveOptions(
            solver="auto", dt0=0.1, rtol=1e-4, atol=1e-6, max_steps=200_000, flow="projected"
        ),
    }
)
"""`long_horizon`'s solves per flow (read-only): tsit5 on the native flow (its clock
slows: few explicit steps), `"auto"` on the projected one (stiff once it has converged),
both at rtol 1e-4, atol 1e-6 (first step 0.1), at most 200,000 steps per interval."""

FIXED_POINTS_OPTIONS = solvers.SolveOptions(
    solver="tsit5", dt0=0.1, rtol=1e-10, atol=1e-12, max_steps=100_000, flow="projected"
)
"""`fixed_points`' solve: the projected flow, tsit5 at rtol 1e-10, atol 1e-12 (first
step 0.1), at most 100,000 steps."""

CONTRIBUTIONS_OPTIONS = solvers.SolveOptions(solver="euler", dt0=0.1, max_steps=100_000)
"""`contributions`' solve: the paper's Euler steps of 0.1 on the native flow."""


def constant_step(options: solvers.SolveOptions) -> float | None:
    """What a result records as `dt0`: the constant step, `None` with adaptive steps (as
    the studies recorded it when `dt0` was a keyword of theirs)."""
    return None if options.adaptive else number(options.dt0)


def number(value) -> float | None:
    """A concrete tolerance or step of a `SolveOptions` as the float a result records
    (None stays None)."""
    return None if value is None else float(value)


def solver_name(options: solvers.SolveOptions) -> str:
    """The solver's name (a diffrax object's class name)."""
    solver = options.solver
    return solver if isinstance(solver, str) else type(solver).__name__


def require_options(study: str, options: Any) -> solvers.SolveOptions:
    """`options` if it is a `solvers.SolveOptions`, else a `TypeError` naming the fix."""
    if not isinstance(options, solvers.SolveOptions):
        raise TypeError(
            f"{study}'s options must be a solvers.SolveOptions (got {type(options).__name__}): "
            "build one with solvers.SolveOptions(solver=..., dt0=..., rtol=..., atol=...)."
        )
    return options


# ------------------------------------------------------------------------ settings

METHODS = ("auto", "dense", "lanczos")


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _at_least_zero(settings: Settings, name: str) -> None:
    value = getattr(settings, name)
    if value is not None and not (_number(value) and math.isfinite(value) and value >= 0):
        raise ValueError(
            f"{type(settings).__name__}.{name} must be None or a finite number >= 0 "
            f"(got {value!r})."
        )


def _one_of(settings: Settings, name: str, choices: Sequence[Any]) -> None:
    value = getattr(settings, name)
    if value not in choices:
        raise ValueError(
            f"{type(settings).__name__}.{name} must be one of "
            f"{', '.join(map(repr, choices))} (got {value!r})."
        )


def _auto_or_positive(settings: Settings, name: str, *, allow_none: bool) -> None:
    if getattr(settings, name) != "auto":
        positive(settings, name, allow_none=allow_none)


@dataclasses.dataclass(frozen=True)
class ConvergenceSettings(Settings):
    """What `convergence` records and fits besides its solves.

    - `n_times`: the number of log-spaced sample times from `t_first` to `t1` (after
      `t = 0`), when no `times` are given.
    - `t_first`: the first of them (tau units).
    - `fixed_point_atol`: RMS G at which the time-and-NFE-to-tolerance solve stops
      (`solvers.FixedPointStop(atol=...)`, capped at `t1`); a mapping gives one per flow
      (a flow missing from it, or `None`, skips that solve: then its `stop_reason` is
      `None`). Recorded in the metadata as `tolerance`.
    - `chunks`: the horizon is solved in this many segments, each continuing from the
      previous end state (memory stays flat; `options.max_steps` applies per segment).
    - `fit_upper`, `fit_floor`: the exponential rate is fitted to `log |G|` over the
      points with `fit_floor < |G| < fit_upper * |G(0)|` (`fit_floor` None:
      `100 (rtol rms(x0) + atol)`, the solver's noise floor; float epsilon for `rtol`
      with constant steps).
    - `hessian`: compute the Hessian at the end state (Newton-polished where Newton
      converges from it) for the predicted rate; `hessian_method` (`"auto"`, `"dense"`,
      `"lanczos"`) as in `hessian_eigenvalues`.
    """

    n_times: int = 160
    t_first: float = 1e-2
    fixed_point_atol: float | Mapping[str, float | None] | None = 1e-6
    chunks: int = 4
    fit_upper: float = 1e-2
    fit_floor: float | None = None
    hessian: bool = True
    hessian_method: Method = "auto"

    def check(self) -> None:
        at_least(self, "n_times", 1)
        positive(self, "t_first")
        at_least(self, "chunks", 1)
        positive(self, "fit_upper")
        _at_least_zero(self, "fit_floor")
        _one_of(self, "hessian", (True, False))
        _one_of(self, "hessian_method", METHODS)
        tol = self.fixed_point_atol
        values = tol.items() if isinstance(tol, Mapping) else [(None, tol)]
        for flow, value in values:
            if flow is not None and flow not in FLOWS:
                raise ValueError(
                    f"ConvergenceSettings.fixed_point_atol has a flow {flow!r}: its keys are "
                    f"flows, {', '.join(FLOWS)}."
                )
            if value is not None and not (_number(value) and math.isfinite(value) and value > 0):
                raise ValueError(
                    "ConvergenceSettings.fixed_point_atol must be a number > 0, None (no "
                    f"stop solve) or a mapping of flows to them (got {value!r})."
                )

    def fixed_point_atol_for(self, flow: str) -> float | None:
        """`fixed_point_atol` for `flow` (None: no stop solve on that flow)."""
        tol = self.fixed_point_atol
        return tol.get(flow) if isinstance(tol, Mapping) else tol


@dataclasses.dataclass(frozen=True)
class LongHorizonSettings(Settings):
    """What `long_horizon` records, stops at and fits besides its solves.

    - `n_times`: the number of record times, `0` and `n_times - 1` log-spaced from
      `t_first` to `t1` (one solve per interval, each continuing from the previous end;
      `options.max_steps` applies per interval).
    - `t_first`: the first log-spaced time (tau units).
    - `hold_tol`: `None` (default) integrates the projected flow to `t1`. A number: RMS G
      at which the **projected** flow's solve stops (`FixedPointStop`); later times are
      that fixed point, held (not integrated). `"auto"`: `10 rtol` of the projected
      flow's options. The native flow is always integrated.
    - `fixed_point_atol`: RMS G below which a flow counts as having reached a fixed point
      (`t_fixed_point`); `"auto"` (default): `10 rtol` of that flow's options (an adaptive
      solve's RMS G stalls between about `0.1 rtol` and `rtol`). Recorded in the metadata
      as `fixed_point_tol`.
    - `fit_start`, `fit_floor`: the decay law of RMS G is fitted from the first time it
      is at most `fit_start` times its peak to the last time it is above `fit_floor`
      (None: the flow's `fixed_point_atol`), on integrated records (`fit_decay_laws`).
    - `error_fn`: `x -> float`, an error of the state (the masked MSE of an image model's
      decoded state); `None` records NaN. `error_name` labels it, units included.
    - `lyapunov_horizons`, `lyapunov_directions`, `lyapunov_segment`, `seed`: the
      finite-time Lyapunov exponents of each end state (`finite_time_lyapunov`, float64,
      its own options on that flow); `()` skips them.
    """

    n_times: int = 41
    t_first: float = 1e-2
    hold_tol: float | Literal["auto"] | None = None
    fixed_point_atol: float | Literal["auto"] = "auto"
    fit_start: float = 0.8
    fit_floor: float | None = None
    error_fn: Callable[[Array], float] | None = None
    error_name: str = "masked MSE"
    lyapunov_horizons: Sequence[float] = (1.0, 10.0, 100.0)
    lyapunov_directions: int = 4
    lyapunov_segment: float = 2.0
    seed: int = 0

    def check(self) -> None:
        at_least(self, "n_times", 2)
        positive(self, "t_first")
        _auto_or_positive(self, "hold_tol", allow_none=True)
        _auto_or_positive(self, "fixed_point_atol", allow_none=False)
        positive(self, "fit_start")
        _at_least_zero(self, "fit_floor")
        if self.error_fn is not None and not callable(self.error_fn):
            raise ValueError(
                "LongHorizonSettings.error_fn must be a function x -> float or None (got "
                f"{type(self.error_fn).__name__})."
            )
        if not isinstance(self.error_name, str):
            raise ValueError(
                f"LongHorizonSettings.error_name must be a string (got {self.error_name!r})."
            )
        horizons = self.lyapunov_horizons
        if isinstance(horizons, str) or not all(
            _number(h) and math.isfinite(h) and h > 0 for h in horizons
        ):
            raise ValueError(
                "LongHorizonSettings.lyapunov_horizons must be a sequence of numbers > 0, "
                f"or () for none (got {horizons!r})."
            )
        at_least(self, "lyapunov_directions", 1)
        positive(self, "lyapunov_segment")
        at_least(self, "seed", 0)


# Newton's tolerance on RMS G for the polish, in float64: near round-off for the models
# here (RMS G of a converged float64 state is 1e-13 to 1e-15).
POLISH_TOL = 1e-11
# `stability`'s polish: Newton to RMS G `POLISH_TOL`, at most 20 steps per round.
STABILITY_POLISH = NewtonSettings(newton_tol=POLISH_TOL, max_newton=20)


@dataclasses.dataclass(frozen=True)
class StabilitySettings(Settings):
    """What `stability` computes beside the Lyapunov solve (`options`).

    - `k`: the eigenvalues at each end of the tangent Hessian's spectrum.
    - `method`: `"auto"` (dense up to `dense_max` state entries, Lanczos above),
      `"dense"` or `"lanczos"` (`hessian_eigenvalues`).
    - `dense_max`: that limit (state entries `N D`).
    - `eigen_tol`: Lanczos' residual tolerance (`hessian_eigenvalues`' `eigen_tol`).
    - `seed`: of Lanczos' start and of the Lyapunov exponent's perturbation.
    - `lyapunov_time`: the horizon of the Lyapunov exponent (tau units; cut where the
      point is unstable: `StabilityLyapunov.capped_from`); `None` skips it.
    - `lyapunov_segments`: its renormalisation pieces.
    - `polish`: the Newton polish of the given point (`solvers.find_fixed_point`, float64):
      `newton_tol` the RMS G it aims for (None: 1e-10 in float64, 1e-5 in float32),
      `max_newton` Newton's steps per round (the projected flow brings the point closer
      between rounds, at most `POLISH_ROUNDS`), `matrix_free` GMRES (`True`), a dense
      Jacobian (`False`) or dense up to `solvers.DENSE_MAX` state entries
      (`None`); no `preconditioner`. Default `STABILITY_POLISH` (RMS G `POLISH_TOL`, 20
      steps). `None`: no polish, the point counts as converged at RMS G below
      `POLISH_TOL`.
    """

    k: int = 6
    method: Method = "auto"
    dense_max: int = solvers.DENSE_MAX
    eigen_tol: float = 1e-10
    seed: int = 0
    lyapunov_time: float | None = 20.0
    lyapunov_segments: int = 20
    polish: NewtonSettings | None = STABILITY_POLISH

    def check(self) -> None:
        at_least(self, "k", 1)
        _one_of(self, "method", METHODS)
        at_least(self, "dense_max", 1)
        positive(self, "eigen_tol")
        at_least(self, "seed", 0)
        positive(self, "lyapunov_time", allow_none=True)
        at_least(self, "lyapunov_segments", 1)
        polish_or_none(self)


# `fixed_points`' polish: Newton to RMS G 1e-10 in at most 100 iterations (those of
# `solvers.find_fixed_point`; `landscape.polish_near`'s own).
FIXED_POINTS_POLISH = NewtonSettings(newton_tol=1e-10, max_newton=100)


@dataclasses.dataclass(frozen=True)
class FixedPointSettings(Settings):
    """What `fixed_points` asks beside its solve.

    - `distance_tol`: two fixed points are the same when the RMS of `g_i* - g_j*` (over
      the `N D` entries, the energy's coordinates) is below it.
    - `fixed_point_atol`: RMS G at which each start's solve stops
      (`FixedPointStop(atol=...)`, capped at `t1`) and below which an end state counts as
      `converged`. Recorded in the metadata as `tolerance`.
    - `polish`: refine each end state by Newton before comparing
      (`landscape.polish_near`: `solvers.find_fixed_point` in float64, kept only where it
      lands within 1e-3 of the end state) with these `NewtonSettings` (`newton_tol`,
      `max_newton`, `matrix_free`; no `preconditioner`); default `FIXED_POINTS_POLISH`,
      RMS G 1e-10 in at most 100 iterations. `None`: no polish (recorded in the
      metadata as `polish: false`).
    - `morse_index`: also count the negative Hessian eigenvalues at each fixed point
      (dense, small models), after a Newton polish whatever `polish` says (`polish`, or
      `FIXED_POINTS_POLISH` without one); `-1` where Newton did not converge near the
      point; refused for a residual that is not a gradient.
    - `seeds`: recorded in the metadata (how the starts were made; None: none).
    """

    distance_tol: float = 1e-6
    fixed_point_atol: float = 1e-9
    polish: NewtonSettings | None = FIXED_POINTS_POLISH
    morse_index: bool = False
    seeds: Mapping[str, Any] | None = None

    def check(self) -> None:
        positive(self, "distance_tol")
        positive(self, "fixed_point_atol")
        polish_or_none(self)
        _one_of(self, "morse_index", (True, False))
        if self.seeds is not None and not isinstance(self.seeds, Mapping):
            raise ValueError(
                "FixedPointSettings.seeds must be a mapping of names to seeds or None (got "
                f"{type(self.seeds).__name__})."
            )


@dataclasses.dataclass(frozen=True)
class WorkPrecisionSettings(Settings):
    """How `work_precision` runs its grid and its reference (the grid, `t1` and `flow` are
    its question). Flat fields, not a reference `SolveOptions`: the reference's `atol`
    follows its `rtol`, and its flow, horizon and cap are the runs'.

    - `atol_factor`: each adaptive run's `atol` is `atol_factor * rtol`.
    - `reference_solver`, `reference_rtol`: the exact reference, solved in float64 (a
      float32 model is cast) with `atol = reference_rtol * 1e-2`.
    - `repeats`: timed calls after a warm-up (the median is reported).
    - `max_steps`: the step cap of every solve (reference, paper's map, runs).
    - `args_batched`: `args` holds one set of conditions per sample (every array leaf has
      the batch axis first), as `solvers.solve`'s `args_batched`.
    """

    atol_factor: float = 1e-2
    reference_solver: str = "dopri8"
    reference_rtol: float = 1e-12
    repeats: int = 3
    max_steps: int = 100_000
    args_batched: bool = False

    def check(self) -> None:
        positive(self, "atol_factor")
        if not isinstance(self.reference_solver, str):
            raise ValueError(
                "WorkPrecisionSettings.reference_solver must be a solver name such as "
                f"'dopri8' (got {type(self.reference_solver).__name__})."
            )
        positive(self, "reference_rtol")
        at_least(self, "repeats", 1)
        at_least(self, "max_steps", 1)
        _one_of(self, "args_batched", (True, False))
