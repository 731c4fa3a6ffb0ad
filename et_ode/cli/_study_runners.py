"""How each study is run on a trained `MaskedImageET` and held-out images: the settings a
job was given (`StudySettings`) and, per study name, a runner `(model, images, masks,
settings) -> (result, plot)` with the defaults the command line documents. Used by
`et_ode.cli.study_job`."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from et_ode import solvers as _solvers

from ..analysis import (
    CONVERGENCE_OPTIONS,
    FIXED_POINTS_OPTIONS,
    LONG_HORIZON_OPTIONS,
    STABILITY_OPTIONS,
    ConvergenceSettings,
    FixedPointSettings,
    GradientDepthSettings,
    ImageEscapeSettings,
    LongHorizonSettings,
    StabilitySettings,
    cast,
    contributions,
    convergence,
    energy_descent,
    fixed_points,
    gradient_depth,
    image_escape,
    long_horizon,
    model_dtype,
    normalised_patches,
    overshoot,
    plot_contributions,
    plot_convergence,
    plot_energy_descent,
    plot_fixed_points,
    plot_gradient_depth,
    plot_image_escape,
    plot_long_horizon,
    plot_overshoot,
    plot_stability,
    plot_temperature_sweep,
    reference_time,
    stability,
    standard_starts,
    take,
    temperature_sweep,
)
from ..tasks import masked_mse
from ..vocab import ADJOINTS, FLOWS
from ._runs import check_dtype, encoded, place
from ._study_commands import COMMANDS

# Core state entries (N D) above which a quick study takes the model's own steps and
# dtype (`StudySettings.economical`): the shipped models have 4,096, the authors' 151,296.
QUICK_STATE_LIMIT = 32_768
# RMS G at which the stability study's flow hands the point to Newton: the polish of
# `analysis.stability` flows on to this value itself (its `NEWTON_START`) from a looser
# point; stopping here with the study's own steps saves compiling another solver.
STABILITY_START = 1e-6


@dataclasses.dataclass(frozen=True)
class StudySettings:
    """What a study job was asked for; `None` means the study's default for this model
    (see `study_job`)."""

    flow: str | None = None
    horizon: float | None = None
    factor: float | None = None
    solver: str | None = None
    dt0: float | None = None
    rtol: float | None = None
    atol: float | None = None
    dtype: str | None = None
    quick: bool = False
    seed: int = 0
    parameter: str | None = None  # continuation: what p is
    p_span: tuple[float, float] | None = None  # continuation: its range
    measure: str | None = None  # lyapunov-spectrum: where tangent vectors are measured
    temperatures: tuple[float, ...] | None = None  # temperature: the temperatures swept

    def tight(self, dtype) -> tuple[float, float]:
        """`(rtol, atol)`: the given ones (both, or refused in one line), else tight for
        `dtype`: 1e-7/1e-9 in float64 (tighter costs many steps: with ReLU memories the
        field has kinks), 1e-5/1e-7 in float32 and in quick mode."""
        if self.rtol is not None or self.atol is not None:
            if self.rtol is None or self.atol is None:
                given, missing = ("rtol", "atol") if self.atol is None else ("atol", "rtol")
                raise ValueError(
                    f"--{given} was given without --{missing}: adaptive steps need both "
                    "(or neither, for the study's own tolerances)."
                )
            return self.rtol, self.atol
        tight = jnp.dtype(dtype) == jnp.float64 and not self.quick
        return (1e-7, 1e-9) if tight else (1e-5, 1e-7)

    def fixed_point_tol(self, dtype) -> float:
        """RMS G at which a state counts as a fixed point: 1e-6 in float64 (at the default
        rtol 1e-7 the residual of the shipped models stalls near 1e-7), 1e-4 in float32
        and in quick mode."""
        return 1e-6 if jnp.dtype(dtype) == jnp.float64 and not self.quick else 1e-4

    def economical(self, model) -> bool:
        """Whether a quick study of `model` runs on the model's own steps and dtype: with
        `quick`, no `--solver`, `--rtol` or `--dtype`, and a core state above
        `QUICK_STATE_LIMIT` entries (the authors' ImageNet model: 197 x 768). Why: at
        that size the ReLU memories switch at almost every step, an adaptive step stays
        near 1e-3 tau, and tsit5 in float64 to t = 20 takes hours on a CPU (docs: the
        authors' model)."""
        size = model.config.n_tokens * model.config.dim
        return (
            self.quick
            and self.solver is None
            and self.rtol is None
            and self.dtype is None
            and size > QUICK_STATE_LIMIT
        )

    def steps(self, model, dtype) -> dict:
        """`solver`, `dt0`, `rtol`, `atol` of the convergence and fixed-point solves: the
        model's own discretisation when `economical(model)` (for `paper` and the authors'
        model the paper's Euler steps of 0.1), else the given solver (default tsit5) at
        the given (else `tight(dtype)`) tolerances. Without `rtol`, a solver that has no
        error estimate (euler, heun, ...), or any solver given with `dt0`, takes constant
        steps of `dt0` (default 0.1), as `--solver` alone means everywhere."""
        if self.economical(model):
            d = model.dynamics
            return dict(solver=d.solver, dt0=d.dt0, rtol=d.rtol, atol=d.atol)
        if self.rtol is None and self.atol is not None:
            raise ValueError(
                f"--atol {self.atol:g} was given without --rtol: adaptive steps "
                "need both (or neither, for the study's own tolerances)."
            )
        if (
            self.solver is not None
            and self.rtol is None
            and (self.dt0 is not None or not _solvers.get_preset(self.solver).adaptive)
        ):
            return dict(solver=self.solver, dt0=self.dt0 or 0.1, rtol=None, atol=None)
        rtol, atol = self.tight(dtype)
        return dict(solver=self.solver or "tsit5", dt0=None, rtol=rtol, atol=atol)

    def solve_options(self, model, horizon) -> _solvers.SolveOptions:
        """The model's dynamics (`model.dynamics.options`) with the given solver options
        (`command_line_options`) and flow, its cap raised to reach `horizon`
        (`SolveOptions.covering`)."""
        if not horizon > 0:
            raise ValueError(f"the horizon must be positive (got {horizon}).")
        options = command_line_options(
            model, solver=self.solver, dt0=self.dt0, rtol=self.rtol, atol=self.atol, flow=self.flow
        )
        return options.covering(0.0, float(horizon))


def command_line_options(
    model,
    *,
    solver: str | None = None,
    dt0: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int | None = None,
    flow: str | None = None,
) -> _solvers.SolveOptions:
    """The model's dynamics (`model.dynamics.options`) with the solver options given on
    a command line (None: not given): a given `solver` brings the given `rtol`/`atol`
    (none: constant steps), else a given `rtol`/`atol` replaces the model's; a given
    `dt0`, `max_steps` or `flow` replaces the model's. Checked as `solvers.SolveOptions`
    checks its fields (the step count to a horizon is checked by `solve`)."""
    changes: dict = {}
    if solver is not None:
        changes.update(solver=solver, rtol=rtol, atol=atol)
    else:
        changes.update({k: v for k, v in dict(rtol=rtol, atol=atol).items() if v is not None})
    given = dict(dt0=dt0, max_steps=max_steps, flow=flow)
    changes.update({k: v for k, v in given.items() if v is not None})
    return model.dynamics.options.replace(**changes)


def _given(s: StudySettings, name: str, option: str):
    """The setting `option` of study `name`: as given, else its default there
    (`StudyCommand.default`, with `--quick`'s when `s.quick`)."""
    value = getattr(s, option)
    return COMMANDS[name].default(option, s.quick) if value is None else value


def _core_problem(model, images, masks, s, default_dtype="float64"):
    """The encoded core problem in `--dtype`, else the model's own dtype when
    `s.economical(model)`, else `default_dtype`."""
    dtype = s.dtype or (str(model_dtype(model.core)) if s.economical(model) else default_dtype)
    core, x0, args = encoded(model, images, masks, dtype)
    return core, x0, args, dtype


def _with_steps(options, steps) -> _solvers.SolveOptions:
    """`options` with `StudySettings.steps`' `solver`, `rtol`, `atol` and `dt0` (a
    `dt0` of None keeps the study's own first step)."""
    return options.replace(**{k: v for k, v in steps.items() if k != "dt0" or v is not None})


def _convergence(model, images, masks, s):
    core, x0, args, dtype = _core_problem(model, images, masks, s)
    # The native flow does not converge: no time-to-tolerance solve for it (nor in quick).
    tolerance = None if s.quick else 1e-6 if jnp.dtype(dtype) == jnp.float64 else 1e-4
    result = convergence(
        core,
        x0,
        args,
        flows=(s.flow,) if s.flow else FLOWS,
        t1=_given(s, "convergence", "horizon"),
        options=_with_steps(CONVERGENCE_OPTIONS, s.steps(model, dtype)),
        settings=ConvergenceSettings(
            n_times=16 if s.quick else 60,
            fixed_point_atol={"native": None, "projected": tolerance},
            chunks=2 if s.quick else 4,
            hessian=False,
        ),
        args_batched=True,
    )
    return result, plot_convergence


def _energy_descent(model, images, masks, s):
    core, x0, args, dtype = _core_problem(model, images, masks, s)
    if s.solver is None:
        specs = [("euler", s.dt0 or 0.1), ("euler", 0.5), ("tsit5",) + s.tight(dtype)]
    elif s.rtol is None:
        specs = [(s.solver, s.dt0 or 0.1)]
    else:
        specs = [(s.solver, s.rtol, s.atol)]
    x0, args = place(x0, args)
    result = energy_descent(
        core,
        x0,
        args,
        specs,
        t1=_given(s, "energy-descent", "horizon"),
        flow=s.flow or model.dynamics.flow,
        args_batched=True,
    )
    return result, plot_energy_descent


def _overshoot(model, images, masks, s):
    if s.horizon is not None and model.dynamics.fixed_point_atol is not None:
        raise ValueError(
            "a fixed-point model's horizon is its stop time, known only after "
            "the solve: give --factor (the end time as a multiple of it) "
            "instead of --horizon."
        )
    factor = s.factor or (s.horizon / model.dynamics.t1 if s.horizon else None)
    changes = {k: v for k, v in dict(dt0=s.dt0, flow=s.flow).items() if v is not None}
    if s.solver is not None:
        changes.update(solver=s.solver, rtol=s.rtol, atol=s.atol)
    if changes.get("rtol", model.dynamics.rtol) is not None:  # adaptive: room for t_max
        changes["max_steps"] = max(model.dynamics.max_steps or 0, 100_000)
    options = model.dynamics.options.replace(**changes)
    if s.dtype is not None:
        check_dtype(s.dtype)
        model = cast(model, jnp.dtype(s.dtype))
    result = overshoot(
        model,
        model.normalisation.apply(np.asarray(images)),
        masks,
        t_max_factor=factor or COMMANDS["overshoot"].default("factor", s.quick),
        n_times=12 if s.quick else 40,
        options=options,
    )
    return result, plot_overshoot


def _stability(model, images, masks, s):
    core, x0, args, dtype = _core_problem(model, images[:1], _first(masks), s)
    # The flow stops at RMS G 1e-6 (`analysis.stability`'s `NEWTON_START`: from a looser
    # stop Newton can reach a neighbouring minimum, not the flow's); `stability` then
    # polishes the point by Newton before any verdict, so --quick lowers resolution (k,
    # the Lyapunov time, Lanczos' tolerance), never correctness.
    economical = s.economical(model)
    x_star, start = _fixed_point(
        model,
        core,
        x0[0],
        take(args, 0, True),
        s,
        dtype,
        tol=None if economical else STABILITY_START,
        steps=start_steps(model, s, dtype),
    )
    # quick and economical: Lanczos to 1e-6 (the authors' size: 90 s for k = 2 in
    # float64, eigenvalues equal to 1e-4's to 9 digits); economical: the exponent at
    # quick tolerances too.
    rtol, atol = s.tight(dtype)
    options = STABILITY_OPTIONS.replace(flow=_given(s, "stability", "flow"))
    result = stability(
        core,
        x_star,
        take(args, 0, True),
        options=options.replace(rtol=rtol, atol=atol) if economical else options,
        coordinates="x",
        settings=StabilitySettings(
            k=2 if s.quick else 6,
            eigen_tol=1e-6 if economical or s.quick else 1e-10,
            lyapunov_time=_given(s, "stability", "horizon"),
            lyapunov_segments=4 if s.quick else 20,
            seed=s.seed,
        ),
    )
    return dict(result, start=start), plot_stability  # the typed result is read-only


def start_steps(model, s, dtype) -> dict | None:
    """The steps of the flow to a study's start at RMS G `STABILITY_START` (stability,
    continuation), or None for `_fixed_point`'s own. `auto` unless `--solver`: near the
    minimum the flow is stiff (rates 0.05 to 32 on `paper`), and an explicit adaptive
    step leaves stiff error at the tolerance's level that G magnifies (tsit5 at rtol 1e-5
    stalls at RMS G 2e-5, where `auto` takes implicit steps: docs, benchmarks, "The flow
    to the stability study's start"); a given explicit solver at tolerances tight enough
    for 1e-6."""
    if s.economical(model) or s.rtol is not None or s.steps(model, dtype)["rtol"] is None:
        return None
    if s.solver is None:
        return dict(s.steps(model, dtype), solver="auto")
    return dict(s.steps(model, dtype), rtol=1e-7, atol=1e-9)


def _fixed_point(model, core, x, args, s, dtype, t1=1000.0, tol=None, steps=None):
    """The projected flow from `x` to RMS G below `tol` (default: the fixed-point
    tolerance for `dtype`) with `steps` (default `StudySettings.steps`). When
    `s.economical(model)` (a quick study at the authors' size, no solver given), a fixed
    point by `solvers.find_fixed_point(method="anderson")` instead (0.17x Euler's
    evaluations there; docs: benchmarks, "Non-smooth dynamics"), named in the returned
    `method`."""
    tol = s.fixed_point_tol(dtype) if tol is None else tol
    if s.economical(model) and steps is None:
        found = _solvers.find_fixed_point(core, x, args=args, tol=tol, method="anderson")
        residual = float(found.residual_rms)
        return found.x, dict(
            method=f"find_fixed_point ({found.method})",
            evaluations=int(found.steps),
            t_final=None,
            stop_reason="fixed_point" if residual <= tol else "not_converged",
            residual_rms=residual,
        )
    steps = {k: v for k, v in (steps or s.steps(model, dtype)).items() if v is not None}
    sol = _solvers.solve(
        core,
        x,
        args=args,
        flow="projected",
        t1=t1,
        max_steps=100_000,
        throw=False,
        stop=_solvers.FixedPointStop(atol=tol),
        **steps,
    )
    return sol.x_final, dict(
        method=f"projected flow ({steps['solver']})",
        evaluations=int(sol.stats["nfe"]),
        t_final=float(sol.t_final),
        stop_reason=sol.stats["stop_reason"],
        residual_rms=float(sol.stats["residual_rms"]),
    )


def _fixed_points(model, images, masks, s):
    core, x0, args, dtype = _core_problem(model, images, masks, s)
    args0 = take(args, 0, True)
    if len(x0) > 1:  # another image's fixed point, under its own conditions
        other = _fixed_point(model, core, x0[1], take(args, 1, True), s, dtype)[0]
    else:
        other = x0[0][::-1]  # the tokens in reverse order
    starts, labels = standard_starts(x0[0], other, jax.random.key(s.seed))
    clamped = getattr(args0, "clamped", None)
    if clamped is not None:  # clamped tokens are the data's in every start
        starts = jnp.where(clamped[None, :, None], x0[0][None], starts)
    rtol, atol = s.tight(dtype)
    result = fixed_points(
        core,
        starts,
        args0,
        labels=labels,
        t1=_given(s, "fixed-points", "horizon"),
        options=FIXED_POINTS_OPTIONS.replace(solver=s.solver or "tsit5", rtol=rtol, atol=atol),
        settings=FixedPointSettings(
            fixed_point_atol=s.fixed_point_tol(dtype),
            polish=None,
            seeds={"matched_noise": s.seed},
        ),
    )
    return result, plot_fixed_points


def _gradient_depth(model, images, masks, s):
    if s.dtype is not None:
        check_dtype(s.dtype)
        model = cast(model, jnp.dtype(s.dtype))
    longest = s.horizon or (2.0 if s.quick else 8.0) * reference_time(model, images, masks)[0]
    fractions = (0.5, 1.0) if s.quick else (0.125, 0.25, 0.5, 1.0)
    result = gradient_depth(
        model,
        images=model.normalisation.apply(np.asarray(images)),
        masking=masks,
        horizons=tuple(f * longest for f in fractions),
        adjoints=("checkpoint",) if s.quick else ADJOINTS,
        options=s.solve_options(model, longest),
        settings=GradientDepthSettings(n_splits=3 if s.quick else 7),
    )
    return result, plot_gradient_depth


def _contributions(model, images, masks, s):
    core, x0, args, _ = _core_problem(model, images, masks, s, str(model_dtype(model.core)))
    horizon = s.horizon or reference_time(model, images, masks)[0]
    x0, args = place(x0, args)
    result = contributions(
        core,
        x0,
        args,
        ts=np.linspace(0.0, horizon, 7 if s.quick else 13),
        masked=np.asarray(model.token_mask(masks.replaced)),
        options=s.solve_options(model, horizon),
        args_batched=True,
    )
    return result, plot_contributions


@eqx.filter_jit
def _encode_one(model, patches, masks):
    return model.encode_batch(patches, masks)


@eqx.filter_jit
def _masked_error(model, x, patches, occluded, mean, std):
    """Masked MSE (normalised units) of one core state `x: [N, D]`, decoded as
    `MaskedImageET.reconstruct` does, in the model's dtype."""
    x = x.astype(model_dtype(model.core))[None]
    return masked_mse(model.decode_batch(x, mean, std), patches, occluded)


def _long_horizon(model, images, masks, s):
    """Both flows (or `--flow`) of the first image to 1e4 (quick: 100) in float64, at
    rtol 1e-4 / atol 1e-6 unless given, with `analysis.long_horizon`'s solvers (tsit5
    native, "auto" projected) unless `--solver`, recorded at 12 times per decade from
    0.01 (quick: 10; an exponential decay within a decade needs about that many records
    for its decay law to be told from a power law); a fixed point at RMS G below
    10 rtol; masked MSE recorded; FTLE over 1, 10, 100 (quick: 1, 10)."""
    dtype = jnp.dtype(s.dtype or "float64")
    check_dtype(dtype)
    first = _first(masks)
    patches = normalised_patches(model, images[:1])
    x0, conditions, mean, std = _encode_one(model, patches, first)
    core, x, args = cast((model.core, x0[0], take(conditions, 0, True)), dtype)

    def error(y):
        return float(_masked_error(model, y, patches, first.occluded, mean, std))

    rtol, atol = (s.rtol, s.atol) if s.rtol is not None else (1e-4, 1e-6)
    steps = dict(rtol=rtol, atol=atol)
    if s.solver is not None:  # on both flows
        steps["solver"] = s.solver
    result = long_horizon(
        core,
        x,
        args,
        flows=(s.flow,) if s.flow else FLOWS,
        t1=_given(s, "long-horizon", "horizon"),
        options={flow: o.replace(**steps) for flow, o in LONG_HORIZON_OPTIONS.items()},
        settings=LongHorizonSettings(
            n_times=41 if s.quick else 73,
            error_fn=error,
            error_name="masked MSE (normalised pixel units)",
            lyapunov_horizons=(1.0, 10.0) if s.quick else (1.0, 10.0, 100.0),
            lyapunov_directions=2 if s.quick else 4,
            seed=s.seed,
        ),
    )
    return result, plot_long_horizon


def _temperature(model, images, masks, s):
    given = _given(s, "temperature", "temperatures")
    if isinstance(given, str):  # the default, as the help shows it
        given = tuple(float(v) for v in given.split(","))
    changes = {k: v for k, v in dict(dt0=s.dt0, flow=s.flow).items() if v is not None}
    result = temperature_sweep(
        model,
        model.normalisation.apply(np.asarray(images)),
        masks,
        given,
        samples=2 if s.quick else 4,
        seed=s.seed,
        options=model.dynamics.options.replace(**changes),
    )
    return result, plot_temperature_sweep


def _escape(model, images, masks, s):
    """`analysis.image_escape` on the first image in float64: quick, barrier/T = 1,
    1.5, 2 with 32 paths to t = 1000; else 1 to 4 with 200 paths to t = 1e4."""
    given = s.temperatures  # None: the barrier over each ratio
    result = image_escape(
        model,
        np.asarray(images[:1]),
        _first(masks),
        given,
        flow=s.flow or "projected",
        settings=ImageEscapeSettings(
            barrier_over_t=(1.0, 1.5, 2.0) if s.quick else (1.0, 1.5, 2.0, 3.0, 4.0),
            paths=32 if s.quick else 200,
            t1=_given(s, "escape", "horizon"),
            dt0=_given(s, "escape", "dt0"),
            seed=s.seed,
        ),
    )
    return result, plot_image_escape


def _first(masks):
    return jax.tree.map(lambda a: a[:1], masks)


RUNNERS = {  # work-precision: et_ode.cli.compare_solvers_job
    "convergence": _convergence,
    "energy-descent": _energy_descent,
    "overshoot": _overshoot,
    "stability": _stability,
    "fixed-points": _fixed_points,
    "gradient-depth": _gradient_depth,
    "contributions": _contributions,
    "long-horizon": _long_horizon,
    "temperature": _temperature,
    "escape": _escape,
}
