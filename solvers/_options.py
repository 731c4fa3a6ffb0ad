"""The options of `solve`: `SolveOptions` (how to solve, in one object) and their checks,
with the messages a user sees (`check_options`; `_check_options`, which `solve`'s
`validate` runs, also defers the checks of traced values to run time). The defaults that
depend on the options are in `._defaults`."""

import math
import numbers
from collections.abc import Sequence
from typing import Any, Literal

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Real

from et_ode.vocab import ADJOINTS, FLOWS, Adjoint, Flow

from ._defaults import MAX_STEPS_LIMIT, constant_step_count, is_traced
from ._presets import SOLVER_NAMES, _label, get_preset
from ._protocol import RealScalar
from ._sde import SDE_SOLVER_NAMES
from ._stop import FixedPointStop, stop_message, stop_tolerances_ok

# What `solve`'s `save` takes: "final", "steps", or the times to save at (a 1-D array, or
# a sequence of numbers).
Save = Literal["final", "steps"] | Real[ArrayLike, " T"] | Sequence[RealScalar]


def _show(value):
    """A value for a message: a traced one has no number to show."""
    if is_traced(value):
        return "<traced>"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 80:
        # a huge integer, shortened (str() of one above 4300 digits raises)
        return f"an integer of {value.bit_length()} bits"
    return value


def _require(deferred, predicate, values, message):
    """Check `predicate(xp, *values)` now (`xp = numpy`) when the values are concrete and
    raise `ValueError(message)` if it fails; when any is traced, append the traced
    predicate (`xp = jax.numpy`) and the message to `deferred` for a run-time check."""
    if is_traced(values):
        deferred.append((predicate(jnp, *values), message))
    elif not bool(predicate(np, *(_concrete(v) for v in values))):
        raise ValueError(message)


def _concrete(value):
    """A concrete value as a NumPy array; a Python int beyond int64 as a float (inf
    beyond the float range), not an array of Python objects."""
    if isinstance(value, int) and not isinstance(value, bool) and not (-(2**63) <= value < 2**63):
        try:
            return np.float64(value)
        except OverflowError:
            return np.float64(math.inf if value > 0 else -math.inf)
    return np.asarray(value)


def _positive_finite(name, value, deferred):
    message = f"{name} must be a positive finite number (got {_show(value)})."
    if value is None:
        raise ValueError(message)
    _require(deferred, lambda xp, v: xp.isfinite(v) & (v > 0), (value,), message)


def _adaptive_controller(controller) -> bool:
    return isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)


def _check_controller(controller, rtol, atol, dtmin):
    if isinstance(controller, type) and issubclass(controller, diffrax.AbstractStepSizeController):
        raise ValueError(
            f"stepsize_controller=diffrax.{controller.__name__} is a class; pass an instance "
            f"such as diffrax.{controller.__name__}(...)."
        )
    if not isinstance(controller, diffrax.AbstractStepSizeController):
        raise ValueError(
            "stepsize_controller must be a diffrax step-size controller such as "
            "diffrax.PIDController(rtol=..., atol=...) or diffrax.ConstantStepSize() "
            f"(got {controller!r})."
        )
    if rtol is not None or atol is not None:
        raise ValueError(
            "stepsize_controller and rtol/atol both set the step control: pass the "
            "tolerances to the controller (diffrax.PIDController(rtol=..., atol=...)) and "
            "drop rtol/atol, or drop stepsize_controller to use the rtol/atol shortcut."
        )
    if dtmin is not None:
        raise ValueError(
            "dtmin belongs to the PID controller that rtol/atol build; with "
            "stepsize_controller set it on the controller "
            "(diffrax.PIDController(..., dtmin=..., force_dtmin=False)) and drop dtmin."
        )


def _check_types(*, t0, t1, dt0, rtol, atol, dtmin, max_steps) -> None:
    """Refuse a time, step or tolerance that is not a real number (a string, a bool, a
    list, `None` for `t0`/`t1`) before any arithmetic on it; arrays and traced values
    must be real scalars."""

    def real_scalar(value) -> bool:
        if isinstance(value, bool):
            return False
        if isinstance(value, numbers.Real):
            return True
        dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
        return (
            dtype is not None
            and shape == ()
            and dtype != np.bool_
            and (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer))
        )

    for name, value, optional in (
        ("t0", t0, False),
        ("t1", t1, False),
        ("dt0", dt0, True),
        ("rtol", rtol, True),
        ("atol", atol, True),
        ("dtmin", dtmin, True),
    ):
        if value is None and optional:
            continue
        if not real_scalar(value):
            raise ValueError(f"{name} must be a real number (got {value!r}).")
    if (
        max_steps is not None
        and not is_traced(max_steps)
        and (isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral))
    ):
        raise ValueError(f"max_steps must be a positive integer (got {_show(max_steps)!r}).")


def _check_step_count(t0, t1, dt0) -> None:
    """Refuse constant steps of `dt0` from `t0` to `t1` (concrete, finite, already
    checked) that take more than `MAX_STEPS_LIMIT` steps."""
    if is_traced((t0, t1, dt0)):
        return
    try:
        t0, t1, dt0 = float(t0), float(t1), float(dt0)
    except (TypeError, ValueError):
        return
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0 and dt0 > 0):
        return
    if (t1 - t0) / dt0 + 1 > MAX_STEPS_LIMIT:
        raise ValueError(
            f"dt0 = {dt0:g} from t0 = {t0:g} to t1 = {t1:g} is {(t1 - t0) / dt0:.3g} "
            f"constant steps, above the limit of {MAX_STEPS_LIMIT} (2**31 - 1: diffrax counts "
            f"steps in int32): use dt0 >= {(t1 - t0) / (MAX_STEPS_LIMIT - 1):.3g}, or "
            "adaptive steps (rtol and atol)."
        )


def _check_options(
    *,
    solver,
    flow,
    adjoint,
    t0,
    t1,
    dt0,
    rtol,
    atol,
    stop,
    save,
    save_energy,
    max_steps,
    stepsize_controller,
    dtmin,
    deferred,
    sde=False,
):
    """`check_options`, returning `(adaptive, preset)`; checks of traced values are
    appended to `deferred` as `(traced predicate, message)` for `solve` to run. `sde`: a
    solve at a temperature (the SDE solvers)."""
    _check_types(t0=t0, t1=t1, dt0=dt0, rtol=rtol, atol=atol, dtmin=dtmin, max_steps=max_steps)
    preset = get_preset(solver, sde=sde)
    label = _label(solver)
    if flow not in FLOWS:
        raise ValueError(f"Unknown flow {flow!r}; use 'native' (the paper's) or 'projected'.")
    if adjoint not in ADJOINTS:
        raise ValueError(f"Unknown adjoint {adjoint!r}; choose one of {', '.join(ADJOINTS)}.")
    _require(
        deferred, lambda xp, t0: xp.isfinite(t0), (t0,), f"t0 must be finite (got {_show(t0)})."
    )
    _require(
        deferred,
        lambda xp, t0, t1: xp.isfinite(t1) & (t1 > t0),
        (t0, t1),
        f"t1 must be finite and greater than t0={_show(t0)} (got t1={_show(t1)}).",
    )
    controller = stepsize_controller
    if controller is not None:
        _check_controller(controller, rtol, atol, dtmin)
        adaptive = _adaptive_controller(controller)
    else:
        adaptive = rtol is not None or atol is not None
    if adaptive:
        if not preset.adaptive:
            how = (
                "rtol/atol (PID step control)"
                if controller is None
                else f"an adaptive step-size controller ({type(controller).__name__})"
            )
            fix = (
                "pass only dt0 for constant steps"
                if controller is None
                else "use diffrax.ConstantStepSize() with dt0 for constant steps"
            )
            given = (
                f"rtol={_show(rtol)}, atol={_show(atol)}"
                if controller is None
                else f"stepsize_controller={type(controller).__name__}(...)"
            )
            raise ValueError(
                f"solver {label} has no error estimate, so {how} cannot be used with it "
                f"(got {given}): {fix}, or choose an adaptive solver such as "
                f"{'spark' if sde else 'tsit5'!r}."
            )
        if controller is None:
            if rtol is None or atol is None:
                raise ValueError(
                    f"Adaptive stepping needs both rtol and atol (got rtol={_show(rtol)}, "
                    f"atol={_show(atol)}); pass both, e.g. rtol=1e-6, atol=1e-8."
                )
            _require(
                deferred,
                # an infinite tolerance would accept every step: no error control at all
                lambda xp, r, a: (
                    xp.isfinite(r) & xp.isfinite(a) & (r >= 0) & (a >= 0) & (r + a > 0)
                ),
                (rtol, atol),
                f"rtol and atol must be finite, >= 0 and not both 0 (got {_show(rtol)}, "
                f"{_show(atol)}).",
            )
        if dt0 is not None:
            _positive_finite("dt0", dt0, deferred)
        if dtmin is not None:
            _positive_finite("dtmin", dtmin, deferred)
    else:
        if preset.self_counting:
            raise ValueError(
                f"solver {label} chooses between an explicit and an implicit method by "
                "the step sizes its error control takes, so it cannot take constant steps "
                f"(got dt0={_show(dt0)} without rtol/atol): pass rtol and atol (PID step "
                "control), e.g. rtol=1e-4, atol=1e-6."
            )
        if preset.needs_controller_tolerances:
            own = (
                ""
                if isinstance(solver, str)
                else f" (or give its root finder tolerances of its own: diffrax.{label}("
                "root_finder=diffrax.VeryChord(rtol=..., atol=...)))"
            )
            raise ValueError(
                f"solver {label} is implicit: its Newton iterations take their tolerances "
                f"from rtol and atol (got dt0={_show(dt0)} without them), so pass both (PID "
                f"step control), or choose an explicit solver for constant steps{own}."
            )
        if dt0 is None:
            raise ValueError(
                f"Constant steps need dt0 > 0 (got dt0=None with solver {label}); "
                "pass dt0, or rtol and atol for adaptive steps."
            )
        _positive_finite("dt0", dt0, deferred)
        if dtmin is not None:
            raise ValueError(
                f"dtmin is the smallest adaptive step, and these are constant steps (got "
                f"dtmin={_show(dtmin)} without rtol/atol): drop dtmin, or pass rtol and atol "
                "for adaptive steps."
            )
    if stop is not None and not isinstance(stop, FixedPointStop):
        raise ValueError(
            "stop must be None or a solvers.FixedPointStop(atol=..., rtol=...) "
            f"(got type {type(stop).__name__})."
        )
    if stop is not None:
        _require(
            deferred, stop_tolerances_ok, (stop.atol, stop.rtol), stop_message(stop.atol, stop.rtol)
        )
    if isinstance(save, str):
        if save not in ("final", "steps"):
            raise ValueError(f"save must be 'final', 'steps' or an array of times (got {save!r}).")
    else:
        ts = save if is_traced(save) else np.asarray(save)
        if ts.ndim != 1 or ts.size == 0:
            raise ValueError(
                f"save as times must be a non-empty 1-D array (got shape {tuple(ts.shape)})."
            )
        _require(
            deferred,
            lambda xp, ts, t0, t1: xp.all(xp.diff(ts) >= 0) & (ts[0] >= t0) & (ts[-1] <= t1),
            (ts, t0, t1),
            f"save times must be non-decreasing and within [t0, t1] = [{_show(t0)}, {_show(t1)}].",
        )
    if (
        not adaptive
        and stop is None
        and (controller is None or isinstance(controller, diffrax.ConstantStepSize))
    ):
        _check_step_count(t0, t1, dt0)
    if max_steps is not None:
        if is_traced(max_steps):
            raise ValueError(
                "max_steps must be a Python int, not a traced value: it sizes the compiled "
                "program (pass it as a static argument)."
            )
        if int(max_steps) < 1:
            raise ValueError(f"max_steps must be a positive integer (got {_show(max_steps)}).")
        if int(max_steps) > MAX_STEPS_LIMIT:
            raise ValueError(
                f"max_steps = {_show(max_steps)} is above the limit of {MAX_STEPS_LIMIT} "
                "(2**31 - 1: diffrax counts steps in int32): pass a smaller max_steps, or none for "
                "solve's own cap."
            )
    elif (
        not adaptive
        and stop is None
        and is_traced((t0, t1, dt0))
        and (controller is None or isinstance(controller, diffrax.ConstantStepSize))
    ):
        raise ValueError(
            "t0, t1 or dt0 is traced (jax.jit/vmap/grad), so the default cap of a "
            "constant-step solve, its exact step count (t1 - t0) / dt0, cannot be computed: "
            "pass max_steps (at least the largest ceil((t1 - t0) / dt0) of the sweep, plus "
            "one), or use adaptive steps (rtol and atol)."
        )
    if adjoint == "backsolve":
        wanted = []
        if stop is not None:
            wanted.append("a fixed-point stop (an event)")
        if save_energy:
            wanted.append("an energy trace (SaveAt(fn=...))")
        if isinstance(save, str) and save == "steps":
            wanted.append("save='steps'")
        if wanted:
            raise ValueError(
                "adjoint='backsolve' cannot be combined with "
                + " or ".join(wanted)
                + " (given here): diffrax's BacksolveAdjoint refuses them. "
                "Use adjoint='checkpoint', or save='final' / an array of times with a finite t1."
            )
    if adjoint == "implicit" and (stop is None or flow != "projected"):
        raise ValueError(
            "adjoint='implicit' differentiates a fixed point: it needs flow='projected' and "
            f"stop=solvers.FixedPointStop(...) (got flow={flow!r}, stop="
            f"{'None' if stop is None else 'FixedPointStop(...)'}). "
            "(On the native flow the end state's scale depends on the whole path, "
            "so no fixed-point gradient exists for x.)"
        )
    return adaptive, preset


# `solve`'s keywords that a `SolveOptions` holds, with `solve`'s defaults (the paper's).
OPTION_DEFAULTS = dict(
    solver="euler",
    dt0=0.1,
    rtol=None,
    atol=None,
    stepsize_controller=None,
    max_steps=None,
    dtmin=None,
    flow="native",
)

# The other keywords of `check_options`, the caller's question rather than how to solve
# (the horizon, the stop rule, what is saved, how gradients are taken), at `solve`'s
# defaults (`t1`: the paper's horizon).
CALLER_DEFAULTS = dict(
    t0=0.0, t1=1.2, stop=None, save="final", save_energy=False, adjoint="checkpoint"
)


def _sde_only(solver) -> bool:
    """Whether `solver` solves only at a temperature (an SDE solver's name that no ODE
    solver has, or a diffrax SDE solver object): `SolveOptions` then checks it as one, and
    `solve` refuses it without a temperature."""
    if isinstance(solver, str):
        return solver in SDE_SOLVER_NAMES and solver not in SOLVER_NAMES
    try:
        get_preset(solver)
    except ValueError:
        try:
            get_preset(solver, sde=True)
        except ValueError:
            return False
        return True
    return False


class SolveOptions(eqx.Module):
    """How to solve: the solver, its steps and tolerances, its caps and the flow, in one
    object that `solve`, every study of `et_ode.analysis`, the task models' `Dynamics`
    and the command line take. The horizon (`t1`), the stop rule, what is saved and how
    gradients are taken are the caller's question, not part of it.

    The defaults are `solve`'s (the paper's): 12 explicit Euler steps of 0.1 on the
    native flow. The fields mean what `solve`'s keywords of the same names mean:

    - `solver`: a name of `SOLVER_NAMES` or any `diffrax.AbstractSolver`.
    - `dt0`: the constant step (tau units) when the steps are constant; with adaptive
      steps the first one (`None`: chosen automatically).
    - `rtol`, `atol`: PID step control (both, or neither for constant steps).
    - `stepsize_controller`: any diffrax controller instead of `rtol`/`atol`.
    - `max_steps`: the step cap (`None`: `solve`'s own, or the study's).
    - `dtmin`: the smallest adaptive step before a solve fails with `"dt_underflow"`.
    - `flow`: `"native"` (the paper's) or `"projected"` (each token's scale kept).

    The combination is checked when the object is made, with `check_options`' messages
    (the checks that need the horizon run in `solve`). An equinox Module: immutable, a
    pytree (tolerances given as arrays may be traced), `replace(**changes)` for a
    variant.

    ```python
    options = solvers.SolveOptions(solver="tsit5", dt0=None, rtol=1e-7, atol=1e-9)
    sol = solvers.solve(model, x0, t1=20.0, options=options)
    ```
    """

    solver: str | diffrax.AbstractSolver = "euler"
    dt0: RealScalar | None = 0.1
    rtol: RealScalar | None = None
    atol: RealScalar | None = None
    stepsize_controller: diffrax.AbstractStepSizeController | None = None
    max_steps: int | None = eqx.field(default=None, static=True)
    dtmin: float | None = None
    flow: Flow = eqx.field(default="native", static=True)

    def __check_init__(self):
        keywords = self.keywords()
        dt0 = keywords["dt0"]
        # A horizon of one step: the step-count limit, which needs the real horizon, is
        # checked by `solve`.
        concrete = isinstance(dt0, numbers.Real) and math.isfinite(dt0) and dt0 > 0
        _check_options(
            **keywords,
            **dict(CALLER_DEFAULTS, t1=float(dt0) if concrete else 1.2),
            deferred=[],
            sde=_sde_only(self.solver),
        )

    def keywords(self) -> dict:
        """These options as `solve`'s keyword arguments."""
        return {name: getattr(self, name) for name in OPTION_DEFAULTS}

    def replace(self, **changes) -> "SolveOptions":
        """A copy with `changes` (field names) applied, checked again."""
        unknown = sorted(set(changes) - set(OPTION_DEFAULTS))
        if unknown:
            raise TypeError(
                f"SolveOptions has no field {', '.join(unknown)}; its fields are "
                f"{', '.join(OPTION_DEFAULTS)}."
            )
        return SolveOptions(**{**self.keywords(), **changes})

    def covering(self, t0: float, t1: float) -> "SolveOptions":
        """These options with a step cap that lets a solve from `t0` to `t1` reach `t1`
        (a trajectory that must pass every saved time): the larger of `max_steps` and the
        constant-step count (plus one for round-off), or of `max_steps` and 4096 for
        adaptive steps (`solve`'s default cap)."""
        if not self.adaptive:  # a step count above diffrax's int32 counter: say so
            _check_step_count(t0, t1, self.dt0)
        steps = None if self.adaptive else constant_step_count(t0, t1, self.dt0)
        cap = max(int(self.max_steps or 0), 4096 if steps is None else steps)
        return self.replace(max_steps=cap)

    @property
    def adaptive(self) -> bool:
        """Whether the steps are adaptive (tolerances, or an adaptive controller)."""
        if self.stepsize_controller is not None:
            return _adaptive_controller(self.stepsize_controller)
        return self.rtol is not None or self.atol is not None

    def describe(self) -> str:
        """One line for a figure or a report: `"tsit5, rtol 1e-07, atol 1e-09"`, or
        `"euler, dt 0.1"`."""
        name = self.solver if isinstance(self.solver, str) else type(self.solver).__name__
        if self.stepsize_controller is not None:
            steps = type(self.stepsize_controller).__name__
        elif self.adaptive:
            traced = is_traced((self.rtol, self.atol))
            steps = "traced tolerances" if traced else f"rtol {self.rtol:g}, atol {self.atol:g}"
        else:
            steps = f"dt {self.dt0:g}" if not is_traced(self.dt0) else "traced dt"
        return f"{name}, {steps}"


def check_options(
    options: SolveOptions | None = None,
    *,
    t0: RealScalar = 0.0,
    t1: RealScalar = 1.2,
    stop: FixedPointStop | None = None,
    save: Save = "final",
    save_energy: bool = False,
    adjoint: Adjoint = "checkpoint",
    sde: bool = False,
    **fields: Any,
) -> bool:
    """Raise `ValueError` naming the problem and the fix for any invalid combination of
    `solve` options that does not depend on the model or the state (solvers and
    controllers, names or diffrax objects; tolerances, steps, events, adjoints); config
    files are checked with it before any work starts. Values that are JAX tracers cannot
    be checked here: `solve` checks them when it runs, with the same messages. Returns
    whether the steps are adaptive.

    - `options`: how to solve, a `SolveOptions` (`None`: `solve`'s defaults, the
      paper's). Or, as `solve` takes them, its fields one by one as keywords (`solver`,
      `dt0`, `rtol`, `atol`, `stepsize_controller`, `max_steps`, `dtmin`, `flow`):
      `check_options(solver="tsit5", dt0=None, rtol=1e-6, atol=1e-8)`, or
      `check_options(**keywords)` with `solve`'s keywords; one given beside `options`
      is refused. `max_steps=None` is `solve`'s default cap.
    - `t0`, `t1`, `stop`, `save`, `save_energy`, `adjoint`: as `solve`'s (the horizon,
      the stop rule, what is saved and how gradients are taken; `t1` defaults to the
      paper's 1.2), checked with the options.
    - `sde`: checked for a solve at a temperature (the SDE solvers: `SDE_SOLVER_NAMES`
      or a diffrax SDE solver).

    ```python
    options = solvers.SolveOptions(solver="tsit5", dt0=None, rtol=1e-6, atol=1e-8)
    solvers.check_options(options, t1=20.0, stop=solvers.FixedPointStop(atol=1e-6))
    ```
    """
    unknown = sorted(set(fields) - set(OPTION_DEFAULTS))
    if unknown:  # the error Python gives for a keyword a signature does not name
        raise TypeError(f"check_options() got an unexpected keyword argument {unknown[0]!r}")
    given = merge_options(options, fields, caller="check_options")
    return _check_options(
        **{**OPTION_DEFAULTS, **given},
        t0=t0,
        t1=t1,
        stop=stop,
        save=save,
        save_energy=save_energy,
        adjoint=adjoint,
        deferred=[],
        sde=sde,
    )[0]


def merge_options(options: "SolveOptions | None", keywords: dict, caller: str = "solve") -> dict:
    """`solve`'s option keywords from `options` and the keywords given beside it: without
    `options`, the keywords; with it, its fields, refusing a keyword of the same name
    given a value other than `solve`'s default (the same choice in two places; `caller`
    names the function in the message)."""
    if options is None:
        return keywords
    if not isinstance(options, SolveOptions):
        raise TypeError(
            f"options must be a solvers.SolveOptions (got {type(options).__name__}); build "
            "one with solvers.SolveOptions(solver=..., dt0=..., rtol=..., atol=...)."
        )
    both = [name for name, value in keywords.items() if not _is_default(name, value)]
    if both:
        raise ValueError(
            f"{caller} got options= and {', '.join(f'{n}=' for n in both)} beside it: give "
            f"each choice once, e.g. options.replace({both[0]}=...)."
        )
    return options.keywords()


def _is_default(name, value) -> bool:
    default = OPTION_DEFAULTS[name]
    if value is default:
        return True
    if is_traced(value) or not isinstance(value, (str, numbers.Number)):
        return False
    return value == default
