"""`solve`: integrate an energy system with diffrax."""

import dataclasses
import math
import numbers
import warnings
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from et_ode.vocab import ADJOINTS, FLOWS, Adjoint, Flow

from ._auto import EXPLICIT_EVALS, AutoSwitch
from ._counting import counted_call, new_counters, read_counts
from ._crawl import PROBE_MIN_STATE, PROBE_STEPS, warn_if_crawling
from ._errors import SolveError
from ._implicit import implicit_fixed_point
from ._presets import SolverPreset, _label, get_preset
from ._protocol import MANIFOLD_METHODS, RealScalar, as_manifold_system, batched_args_axes
from ._solution import FAILURES, STOP_REASONS, EnergySolution, StopReason, stop_code
from ._stop import FixedPointStop, residual_event, rms, stop_message, stop_tolerances_ok

# Measured (tests/test_gradients.py, float64, tsit5, softmax test model): backsolve's
# error against exact gradients is ~1e2 rtol at 1.2 tau on the projected flow and then
# grows about tenfold per 0.1 tau (3e-6 / 2.5e-2 / 1e26 at 1.5 / 2 / 5 tau, rtol 1e-10);
# on the native flow, whose clock slows like 1/t, it grows slowly (~20 rtol at 100 tau,
# ~300 rtol at 1000). Beyond this many tau backsolve is warned about.
BACKSOLVE_STABLE_HORIZON = {"native": 100.0, "projected": 1.2}


@dataclasses.dataclass(frozen=True)
class _Config:
    """Everything about a solve that changes the compiled program, besides the solver and
    step-size controller objects (arguments of the compiled function)."""

    solver: str  # the solver's class name: a label (the object is an argument)
    flow: Flow
    adaptive: bool
    save: str  # "final" | "steps" | "ts"
    save_energy: bool
    adjoint: Adjoint
    max_steps: int
    fixed_point: bool
    checkpoints: int | None
    batched: bool
    args_batched: bool
    # A batch solved sample by sample (lax.map) rather than by vmap: solver="auto",
    # whose implicit branch cost about 4 ms per step under vmap even when no sample
    # ran it (shipped core, CPU); each sample also takes its own steps.
    sequential: bool = False
    # Every evaluation and JVP counted by a host callback (`count_evaluations=True`).
    counted: bool = False


class _FlowTerm(eqx.Module):
    """The vector field as a PyTree holding the model, so that adjoints see its
    parameters. diffrax `args` are `(model_args, fixed_point_threshold)`."""

    model: Any
    flow: Flow = eqx.field(static=True)

    def __call__(self, t, y, args):
        return self.model.vector_field(t, y, args[0], self.flow)


def _native_field(model, t, y, args):
    return model.vector_field(t, y, args[0], "native")


def _projected_field(model, t, y, args):
    return model.vector_field(t, y, args[0], "projected")


# static, hashable functions for `counted_call` (one per flow: no retrace per solve)
_FIELDS = {"native": _native_field, "projected": _projected_field}


class _CountedFlowTerm(eqx.Module):
    """`_FlowTerm` whose every evaluation and JVP is reported to `counter`."""

    model: Any
    counter: jax.Array
    flow: Flow = eqx.field(static=True)

    def __call__(self, t, y, args):
        return counted_call(_FIELDS[self.flow], self.counter, self.model, t, y, args)


def _saveat(cfg: _Config, ts_save, model, solver_state=False):
    # With steps=True diffrax saves the last step in the steps block, not in a t1 slot.
    # solver_state: the final solver state (a self-counting solver's counters).
    main = dict(t1=True)
    if cfg.save == "steps":
        main = dict(t0=True, steps=True)
    elif cfg.save == "ts":
        main.update(ts=ts_save)
    if not cfg.save_energy:
        return diffrax.SaveAt(**main, solver_state=solver_state)
    energy = diffrax.SubSaveAt(
        t0=True, steps=True, fn=lambda t, y, args: model.energy(y, args[0])
    )
    return diffrax.SaveAt(subs=[diffrax.SubSaveAt(**main), energy],
                          solver_state=solver_state)


def _solve_one(model, x0, args, numbers, ts_save, solver, controller, cfg: _Config,
               counter=None):
    """One sample: diffrax solve plus the numbers the wrapper needs. Traceable.
    `controller`: the caller's step-size controller, or `None` for the shortcuts (PID
    step control from `rtol`/`atol`, else constant steps); `counter`: its id when
    `cfg.counted`."""
    if controller is None and cfg.adaptive:
        controller = diffrax.PIDController(
            rtol=numbers["rtol"], atol=numbers["atol"], dtmin=numbers["dtmin"],
            force_dtmin=False,
        )
    elif controller is None:
        controller = diffrax.ConstantStepSize()
    counting = isinstance(solver, AutoSwitch)
    if counting and cfg.adaptive and "rtol" in numbers and solver.rtol is None:
        # the rtol/atol shortcut: the solver rescales its implicit error with them
        solver = eqx.tree_at(lambda s: (s.rtol, s.atol), solver,
                             (numbers["rtol"], numbers["atol"]), is_leaf=lambda x: x is None)
    if cfg.adjoint == "backsolve":
        # throw=True: the backward solve has no stop code to report, so running out of
        # steps there must raise rather than return silently wrong gradients.
        adjoint = diffrax.BacksolveAdjoint(
            solver=solver, stepsize_controller=controller, throw=True
        )
    else:
        adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=cfg.checkpoints)

    g0 = rms(model.residual(x0, args))
    threshold = jnp.maximum(numbers["fp_atol"], numbers["fp_rtol"] * g0)
    field = (_CountedFlowTerm(model, counter, cfg.flow) if cfg.counted
             else _FlowTerm(model, cfg.flow))
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        solver,
        numbers["t0"],
        numbers["t1"],
        numbers["dt0"] if "dt0" in numbers else None,
        x0,
        args=(args, threshold),
        saveat=_saveat(cfg, ts_save, model, solver_state=counting),
        stepsize_controller=controller,
        adjoint=adjoint,
        event=residual_event(model) if cfg.fixed_point else None,
        max_steps=cfg.max_steps,
        throw=False,
    )
    if cfg.save_energy:
        (ts, xs), (energy_ts, energies) = (sol.ts[0], sol.ys[0]), (sol.ts[1], sol.ys[1])
    else:
        ts, xs, energy_ts, energies = sol.ts, sol.ys, None, None
    last = sol.stats["num_accepted_steps"] if cfg.save == "steps" else -1
    if cfg.save == "ts":
        # diffrax writes the end state into the first free slot: the last one, unless the
        # solve stopped early (fixed point, max_steps), when the unreached times stay inf.
        last = jnp.sum(jnp.isfinite(ts)) - 1
    x_final, t_final = xs[last], ts[last]
    if cfg.save == "ts":  # drop the slot that only serves x_final; unreached times: inf
        unreached = jnp.arange(ts.shape[0]) >= last
        ts = jnp.where(unreached, jnp.inf, ts)[:-1]
        xs = jnp.where(unreached[:, None, None], jnp.inf, xs)[:-1]
    g_final = rms(model.residual(jax.lax.stop_gradient(x_final), args))
    finite = jnp.all(jnp.isfinite(x_final))
    reason = StopReason.t1
    if cfg.fixed_point:
        reason = StopReason.where(g_final <= threshold, StopReason.fixed_point,
                                  StopReason.not_converged)
    reason = StopReason.where(sol.result == diffrax.RESULTS.max_steps_reached,
                              StopReason.max_steps, reason)
    reason = StopReason.where(sol.result == diffrax.RESULTS.dt_min_reached,
                              StopReason.dt_underflow, reason)
    reason = StopReason.where(finite, reason, StopReason.nonfinite)
    return dict(
        ts=ts, xs=xs, energy_ts=energy_ts, energies=energies,
        x_final=x_final, t_final=t_final,
        num_steps=sol.stats["num_steps"],
        num_accepted_steps=sol.stats["num_accepted_steps"],
        num_rejected_steps=sol.stats["num_rejected_steps"],
        residual_rms=g_final, residual_rms_initial=g0, threshold=threshold,
        stop=reason,
        own_counts=None if not counting else dict(
            f_evals=sol.solver_state.f_evals, jvp_evals=sol.solver_state.jvp_evals,
            num_switches=sol.solver_state.num_switches,
            implicit_steps=sol.solver_state.implicit_steps),
        counted=read_counts(counter, x_final) if cfg.counted else None,
    )


@eqx.filter_jit
def _solve_core(model, x0, args, numbers, ts_save, solver, controller, cfg: _Config,
                counters=None):
    def fn(x, a, counter=None):
        return _solve_one(model, x, a, numbers, ts_save, solver, controller, cfg, counter)

    if cfg.batched and cfg.sequential:
        def sample(i):  # batched args: as batched_args_axes, array leaves on axis 0
            a = args if not cfg.args_batched else jax.tree.map(
                lambda leaf: leaf[i] if jnp.ndim(leaf) > 0 else leaf, args)
            return fn(x0[i], a, None if counters is None else counters[i])

        return jax.lax.map(sample, jnp.arange(x0.shape[0]))
    if cfg.counted:
        return fn(x0, args, counters[0])
    if cfg.batched:
        fn = jax.vmap(fn, in_axes=(0, batched_args_axes(args) if cfg.args_batched else None))
    return fn(x0, args)


def _default_dtmin(t0, t1, dtype):
    # A step of a few ulps of t no longer advances t: fail as dt_underflow, not max_steps.
    eps = float(jnp.finfo(dtype).eps)
    if _is_traced((t0, t1)):  # the same rule in jnp arithmetic
        t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
        return jnp.maximum(1e-12 * (t1 - t0), 16 * eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1)))
    ulp = eps * max(abs(float(t0)), abs(float(t1)))
    return max(1e-12 * (float(t1) - float(t0)), 16 * ulp)


def _probe(model, x0, args, numbers, solver, controller, cfg, t0, t1, max_steps, name, rtol):
    """`PROBE_STEPS` steps of this solve on its first sample, and a `SlowSolveWarning`
    where their mean step would not reach `t1` within `max_steps` (`solvers._crawl`)."""
    one = dataclasses.replace(cfg, max_steps=PROBE_STEPS, save="final", save_energy=False,
                              adjoint="checkpoint", checkpoints=None, batched=False,
                              args_batched=False, sequential=False, counted=False)
    x_one = x0[0] if cfg.batched else x0
    a_one = (jax.tree.map(lambda leaf, axis: leaf if axis is None else leaf[0], args,
                          batched_args_axes(args)) if cfg.args_batched else args)
    warn_if_crawling(
        lambda: _solve_core(model, x_one, a_one, numbers, None, solver, controller, one),
        t0=t0, t1=t1, max_steps=max_steps, entries=x_one.size, solver=name, rtol=rtol)


def _is_traced(tree) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))


def _show(value):
    """A value for a message: a traced one has no number to show."""
    if _is_traced(value):
        return "<traced>"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 80:
        # a huge integer, shortened (str() of one above 4300 digits raises)
        return f"an integer of {value.bit_length()} bits"
    return value


def _require(deferred, predicate, values, message):
    """Check `predicate(xp, *values)` now (`xp = numpy`) when the values are concrete and
    raise `ValueError(message)` if it fails; when any is traced, append the traced
    predicate (`xp = jax.numpy`) and the message to `deferred` for a run-time check."""
    if _is_traced(values):
        deferred.append((predicate(jnp, *values), message))
    elif not bool(predicate(np, *(_concrete(v) for v in values))):
        raise ValueError(message)


def _concrete(value):
    """A concrete value as a NumPy array; a Python int beyond int64 as a float (inf
    beyond the float range), not an array of Python objects."""
    if isinstance(value, int) and not isinstance(value, bool) and not (
            -(2**63) <= value < 2**63):
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


DEFAULT_MAX_STEPS = 4096
# The largest step cap: diffrax counts steps in an int32 (a cap of 2**31 is an
# OverflowError without jax_enable_x64), and a constant-step solve needs (t1 - t0) / dt0
# steps plus one. Anything beyond it could only crash, or run for days.
MAX_STEPS_LIMIT = 2**31 - 1
# Implicit diffrax solvers (kvaerno5, Kvaerno3, ...) build the dense (N D)^2 Jacobian
# (N D JVPs) and factorise it: refused above this many state entries per sample.
DENSE_JACOBIAN_MAX_STATE = 1024
EVERY_STEP_CHECKPOINTS_UP_TO = 64


def constant_step_count(t0, t1, dt0, rtol=None, atol=None) -> int | None:
    """The number of steps a constant-step solve from `t0` to `t1` takes (the last one
    may be shorter), plus one for diffrax's final bookkeeping step: the exact `max_steps`
    it needs. `None` when the steps are adaptive (`rtol` or `atol` given), `dt0` is
    missing, or the values are traced or invalid (then `check_options` names the
    problem)."""
    if rtol is not None or atol is not None or dt0 is None:
        return None
    try:
        ratio = (float(t1) - float(t0)) / float(dt0)
    except (TypeError, ValueError, ZeroDivisionError, jax.errors.ConcretizationTypeError):
        return None
    if not (math.isfinite(ratio) and ratio > 0):
        return None
    return math.ceil(ratio * (1 - 1e-9)) + 1


def _default_cap(t0, t1, dt0, rtol, atol, stop, adjoint, checkpoints, controller=None):
    """`(max_steps, checkpoints)` when the caller gave no `max_steps` (see `solve`)."""
    constant = controller is None or isinstance(controller, diffrax.ConstantStepSize)
    steps = (None if stop is not None or not constant
             else constant_step_count(t0, t1, dt0, rtol, atol))
    if steps is None:
        return DEFAULT_MAX_STEPS, checkpoints
    if adjoint == "checkpoint" and checkpoints is None and steps <= EVERY_STEP_CHECKPOINTS_UP_TO:
        checkpoints = steps
    return steps, checkpoints


def check_options(*, solver="euler", flow="native", adjoint="checkpoint", t0=0.0, t1=1.2,
                  dt0=0.1, rtol=None, atol=None, stop=None, save="final", save_energy=False,
                  max_steps=None, stepsize_controller=None, dtmin=None) -> bool:
    """Raise `ValueError` naming the problem and the fix for any invalid combination of
    `solve` options that does not depend on the model or the state (solvers and
    controllers, names or diffrax objects; tolerances, steps, events, adjoints); config
    files are checked with it before any work starts. `max_steps=None` is `solve`'s
    default cap. Values that are JAX tracers cannot be checked here: `solve` checks them
    when it runs, with the same messages. Returns whether the steps are adaptive."""
    return _check_options(
        solver=solver, flow=flow, adjoint=adjoint, t0=t0, t1=t1, dt0=dt0, rtol=rtol,
        atol=atol, stop=stop, save=save, save_energy=save_energy, max_steps=max_steps,
        stepsize_controller=stepsize_controller, dtmin=dtmin, deferred=[])[0]


def _adaptive_controller(controller) -> bool:
    return isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)


def _check_controller(controller, rtol, atol, dtmin):
    if isinstance(controller, type) and issubclass(controller, diffrax.AbstractStepSizeController):
        raise ValueError(
            f"stepsize_controller=diffrax.{controller.__name__} is a class; pass an instance "
            f"such as diffrax.{controller.__name__}(...).")
    if not isinstance(controller, diffrax.AbstractStepSizeController):
        raise ValueError(
            "stepsize_controller must be a diffrax step-size controller such as "
            "diffrax.PIDController(rtol=..., atol=...) or diffrax.ConstantStepSize() "
            f"(got {controller!r}).")
    if rtol is not None or atol is not None:
        raise ValueError(
            "stepsize_controller and rtol/atol both set the step control: pass the "
            "tolerances to the controller (diffrax.PIDController(rtol=..., atol=...)) and "
            "drop rtol/atol, or drop stepsize_controller to use the rtol/atol shortcut.")
    if dtmin is not None:
        raise ValueError(
            "dtmin belongs to the PID controller that rtol/atol build; with "
            "stepsize_controller set it on the controller "
            "(diffrax.PIDController(..., dtmin=..., force_dtmin=False)) and drop dtmin.")


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
        return (dtype is not None and shape == () and dtype != np.bool_
                and (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)))

    for name, value, optional in (("t0", t0, False), ("t1", t1, False), ("dt0", dt0, True),
                                  ("rtol", rtol, True), ("atol", atol, True),
                                  ("dtmin", dtmin, True)):
        if value is None and optional:
            continue
        if not real_scalar(value):
            raise ValueError(f"{name} must be a real number (got {value!r}).")
    if max_steps is not None and not _is_traced(max_steps) and (
            isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral)):
        raise ValueError(f"max_steps must be a positive integer (got {_show(max_steps)!r}).")


def _check_step_count(t0, t1, dt0) -> None:
    """Refuse constant steps of `dt0` from `t0` to `t1` (concrete, finite, already
    checked) that take more than `MAX_STEPS_LIMIT` steps."""
    if _is_traced((t0, t1, dt0)):
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
            "adaptive steps (rtol and atol).")


def _check_options(*, solver, flow, adjoint, t0, t1, dt0, rtol, atol, stop, save,
                   save_energy, max_steps, stepsize_controller, dtmin, deferred):
    """`check_options`, returning `(adaptive, preset)`; checks of traced values are
    appended to `deferred` as `(traced predicate, message)` for `solve` to run."""
    _check_types(t0=t0, t1=t1, dt0=dt0, rtol=rtol, atol=atol, dtmin=dtmin,
                 max_steps=max_steps)
    preset = get_preset(solver)
    label = _label(solver)
    if flow not in FLOWS:
        raise ValueError(f"Unknown flow {flow!r}; use 'native' (the paper's) or 'projected'.")
    if adjoint not in ADJOINTS:
        raise ValueError(f"Unknown adjoint {adjoint!r}; choose one of {', '.join(ADJOINTS)}.")
    _require(deferred, lambda xp, t0: xp.isfinite(t0), (t0,),
             f"t0 must be finite (got {_show(t0)}).")
    _require(deferred, lambda xp, t0, t1: xp.isfinite(t1) & (t1 > t0), (t0, t1),
             f"t1 must be finite and greater than t0={_show(t0)} (got t1={_show(t1)}).")
    controller = stepsize_controller
    if controller is not None:
        _check_controller(controller, rtol, atol, dtmin)
        adaptive = _adaptive_controller(controller)
    else:
        adaptive = rtol is not None or atol is not None
    if adaptive:
        if not preset.adaptive:
            how = ("rtol/atol (PID step control)" if controller is None else
                   f"an adaptive step-size controller ({type(controller).__name__})")
            fix = ("pass only dt0 for constant steps" if controller is None else
                   "use diffrax.ConstantStepSize() with dt0 for constant steps")
            given = (f"rtol={_show(rtol)}, atol={_show(atol)}" if controller is None
                     else f"stepsize_controller={type(controller).__name__}(...)")
            raise ValueError(
                f"solver {label} has no error estimate, so {how} cannot be used with it "
                f"(got {given}): {fix}, or choose an adaptive solver such as 'tsit5'."
            )
        if controller is None:
            if rtol is None or atol is None:
                raise ValueError(
                    f"Adaptive stepping needs both rtol and atol (got rtol={_show(rtol)}, "
                    f"atol={_show(atol)}); pass both, e.g. rtol=1e-6, atol=1e-8.")
            _require(deferred,
                     lambda xp, r, a: (r >= 0) & (a >= 0) & (r + a > 0), (rtol, atol),
                     f"rtol and atol must be >= 0 and not both 0 "
                     f"(got {_show(rtol)}, {_show(atol)}).")
        if dt0 is not None:
            _positive_finite("dt0", dt0, deferred)
    else:
        if preset.self_counting:
            raise ValueError(
                f"solver {label} chooses between an explicit and an implicit method by "
                "the step sizes its error control takes, so it cannot take constant steps "
                f"(got dt0={_show(dt0)} without rtol/atol): pass rtol and atol (PID step "
                "control), e.g. rtol=1e-4, atol=1e-6.")
        if preset.needs_controller_tolerances:
            own = ("" if isinstance(solver, str) else
                   f" (or give its root finder tolerances of its own: diffrax.{label}("
                   "root_finder=diffrax.VeryChord(rtol=..., atol=...)))")
            raise ValueError(
                f"solver {label} is implicit: its Newton iterations take their tolerances "
                f"from rtol and atol (got dt0={_show(dt0)} without them), so pass both (PID "
                f"step control), or choose an explicit solver for constant steps{own}."
            )
        if dt0 is None:
            raise ValueError(f"Constant steps need dt0 > 0 (got dt0=None with solver {label}); "
                             "pass dt0, or rtol and atol for adaptive steps.")
        _positive_finite("dt0", dt0, deferred)
    if stop is not None and not isinstance(stop, FixedPointStop):
        raise ValueError("stop must be None or a solvers.FixedPointStop(atol=..., rtol=...) "
                         f"(got type {type(stop).__name__}).")
    if stop is not None:
        _require(deferred, stop_tolerances_ok, (stop.atol, stop.rtol),
                 stop_message(stop.atol, stop.rtol))
    if isinstance(save, str):
        if save not in ("final", "steps"):
            raise ValueError(f"save must be 'final', 'steps' or an array of times (got {save!r}).")
    else:
        ts = save if _is_traced(save) else np.asarray(save)
        if ts.ndim != 1 or ts.size == 0:
            raise ValueError("save as times must be a non-empty 1-D array (got shape "
                             f"{tuple(ts.shape)}).")
        _require(deferred,
                 lambda xp, ts, t0, t1: xp.all(xp.diff(ts) >= 0) & (ts[0] >= t0) & (ts[-1] <= t1),
                 (ts, t0, t1),
                 f"save times must be non-decreasing and within [t0, t1] = "
                 f"[{_show(t0)}, {_show(t1)}].")
    if not adaptive and stop is None and (
            controller is None or isinstance(controller, diffrax.ConstantStepSize)):
        _check_step_count(t0, t1, dt0)
    if max_steps is not None:
        if _is_traced(max_steps):
            raise ValueError(
                "max_steps must be a Python int, not a traced value: it sizes the compiled "
                "program (pass it as a static argument).")
        if int(max_steps) < 1:
            raise ValueError(f"max_steps must be a positive integer (got {_show(max_steps)}).")
        if int(max_steps) > MAX_STEPS_LIMIT:
            raise ValueError(
                f"max_steps = {_show(max_steps)} is above the limit of {MAX_STEPS_LIMIT} (2**31 - 1: "
                "diffrax counts steps in int32): pass a smaller max_steps, or none for "
                "solve's own cap.")
    elif (not adaptive and stop is None and _is_traced((t0, t1, dt0))
          and (controller is None or isinstance(controller, diffrax.ConstantStepSize))):
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
                "adjoint='backsolve' cannot be combined with " + " or ".join(wanted)
                + " (given here): diffrax's BacksolveAdjoint refuses them. Use adjoint='checkpoint', or "
                "save='final' / an array of times with a finite t1."
            )
    if adjoint == "implicit" and (stop is None or flow != "projected"):
        raise ValueError(
            "adjoint='implicit' differentiates a fixed point: it needs flow='projected' and "
            f"stop=solvers.FixedPointStop(...) (got flow={flow!r}, stop="
            f"{'None' if stop is None else 'FixedPointStop(...)'}). (On the native flow the end state's scale "
            "depends on the whole path, so no fixed-point gradient exists for x.)"
        )
    return adaptive, preset


def _validate(model, x0, args, *, solver, flow, adjoint, t0, t1, dt0, rtol, atol,
              stop, save, save_energy, max_steps, stepsize_controller, dtmin, args_batched,
              traced, deferred):
    for method in ("energy", "vector_field", "residual"):
        if not callable(getattr(model, method, None)):
            raise ValueError(
                f"model has no {method}() method; solvers.solve needs an object "
                "satisfying solvers.EnergySystem (energy, vector_field, residual)."
            )
    adaptive, preset = _check_options(
        solver=solver, flow=flow, adjoint=adjoint, t0=t0, t1=t1, dt0=dt0, rtol=rtol,
        atol=atol, stop=stop, save=save, save_energy=save_energy, max_steps=max_steps,
        stepsize_controller=stepsize_controller, dtmin=dtmin, deferred=deferred)
    if x0.ndim not in (2, 3):
        raise ValueError(
            f"x0 must have shape [N, D] or [B, N, D]; got shape {tuple(x0.shape)}."
        )
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"x0 must be a floating-point array (got dtype {x0.dtype}).")
    size = int(np.prod(x0.shape[-2:]))
    if preset.implicit and size > DENSE_JACOBIAN_MAX_STATE:
        raise ValueError(
            f"solver {_label(solver)} is implicit with a dense Jacobian: each Jacobian "
            f"costs N D = {size} JVPs and an (N D)^2 factorisation (on the shipped core, "
            f"N D = 4096: 104 s for 127 evaluations), above the limit of "
            f"{DENSE_JACOBIAN_MAX_STATE} state entries. Use solver=\"auto\" (explicit while "
            "not stiff, matrix-free implicit steps while stiff) with rtol and atol.")
    params = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    if params and jnp.result_type(x0, *params) != x0.dtype:
        raise ValueError(
            f"x0 has dtype {x0.dtype} but the model's parameters promote it to "
            f"{jnp.result_type(x0, *params)}; cast x0 to the model's dtype "
            "(x0.astype(...)) or build the model with dtype=x0.dtype."
        )
    finite = None if traced else jnp.all(jnp.isfinite(x0))
    if not (finite is None or _is_traced(finite) or bool(finite)):  # traced inside jit
        raise ValueError("x0 contains NaN or inf values; pass a finite initial state.")
    if hasattr(model, "check_inputs"):
        batch = (x0.shape[0],) if (x0.ndim == 3 and args_batched) else ()
        model.check_inputs(tuple(x0.shape[-2:]), args, batch)
    if args_batched and x0.ndim != 3:
        raise ValueError("args_batched=True needs a batched x0 of shape [B, N, D].")
    tau = getattr(model, "tau", 1.0)
    if not (isinstance(tau, (int, float)) and tau > 0):
        raise ValueError(f"model.tau must be positive (got {tau}).")
    if adjoint == "backsolve" and not _is_traced((t0, t1)):  # traced: no warning
        horizon = (float(t1) - float(t0)) / float(tau)
        if horizon > BACKSOLVE_STABLE_HORIZON[flow]:
            warnings.warn(
                f"adjoint='backsolve' on the {flow} flow over {horizon:g} tau: integrating "
                "the flow backwards amplifies the solver's error (exponentially where the flow "
                f"contracts fast), and beyond {BACKSOLVE_STABLE_HORIZON[flow]:g} tau its "
                "gradients were measured to be unreliable (the horizon depends on the "
                "weights). Prefer adjoint='checkpoint' (exact) or 'implicit' (at a fixed "
                "point).",
                stacklevel=3,
            )
    if adjoint == "implicit":
        present = [m for m in MANIFOLD_METHODS if callable(getattr(model, m, None))]
        if present and len(present) < len(MANIFOLD_METHODS):
            raise ValueError(
                f"adjoint='implicit' on a model that declares {', '.join(present)} but not "
                f"all of {', '.join(MANIFOLD_METHODS)} (solvers.ManifoldEnergySystem): give "
                "all three, or none for a flat model.")
    return adaptive, preset


# PIDController fields that are plain numbers: made arrays of the solve's dtype, so that
# new values reuse the compiled program (Python floats would be static) and a float32
# solve is not promoted by float64 tolerances.
_PID_NUMBERS = ("rtol", "atol", "pcoeff", "icoeff", "dcoeff", "dtmin", "dtmax",
                "factormin", "factormax", "safety")


def _controller_in_dtype(controller, dtype):
    """The caller's controller with its numbers (and `jump_ts`/`step_ts`) as arrays of
    `dtype`; other controllers unchanged."""
    def number(value):
        return (not isinstance(value, bool) and isinstance(value, (int, float, np.number))
                or (isinstance(value, (np.ndarray, jax.Array)) and value.ndim == 0
                    and jnp.issubdtype(value.dtype, jnp.floating)))

    if isinstance(controller, diffrax.ClipStepSizeController):
        names = [n for n in ("step_ts", "jump_ts") if getattr(controller, n) is not None]
        controller = eqx.tree_at(
            lambda c: [c.controller] + [getattr(c, n) for n in names], controller,
            [_controller_in_dtype(controller.controller, dtype)]
            + [jnp.asarray(getattr(controller, n), dtype) for n in names])
    elif isinstance(controller, diffrax.PIDController):
        names = [n for n in _PID_NUMBERS if number(getattr(controller, n))]
        controller = eqx.tree_at(
            lambda c: [getattr(c, n) for n in names], controller,
            [jnp.asarray(getattr(controller, n), dtype) for n in names])
    return controller


def _controller_name(controller, adaptive) -> str:
    if controller is None:
        return "PIDController" if adaptive else "ConstantStepSize"
    if isinstance(controller, diffrax.ClipStepSizeController):
        return f"ClipStepSizeController({type(controller.controller).__name__})"
    return type(controller).__name__


def solve(
    model,
    x0,
    *,
    args=None,
    t0: RealScalar = 0.0,
    t1: RealScalar | None = None,
    solver: str | diffrax.AbstractSolver = "euler",
    dt0: RealScalar | None = 0.1,
    rtol: RealScalar | None = None,
    atol: RealScalar | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    flow: str = "native",
    stop: FixedPointStop | None = None,
    save="final",
    save_energy: bool = False,
    adjoint: str = "checkpoint",
    checkpoints: int | None = None,
    max_steps: int | None = None,
    dtmin: float | None = None,
    args_batched: bool = False,
    implicit_tol: float | None = None,
    throw: bool = True,
    count_evaluations: bool = False,
) -> EnergySolution:
    """Integrate `tau dx/dt = -dE/dg` (or its projection) from `x0`.

    The defaults reproduce the paper: 12 explicit Euler steps of 0.1 to `t1 = 1.2`, native
    flow, gradients by checkpointed backpropagation through the steps.

    **Arguments:**

    - `model`: a `solvers.EnergySystem` (for instance `et_ode.EnergyTransformer`).
    - `x0`: initial tokens, `[N, D]` or a batch `[B, N, D]` (solved with `jax.vmap`).
    - `args`: the model's conditions (for the ET, an `et_ode.Conditions`); shared by the
      batch unless `args_batched=True` (every array leaf then has a leading `B` axis).
    - `t0`, `t1`: time span in the model's time units (`tau`). Default `t1`: 1.2, or with a
      fixed-point `stop`, 1000 (then `t1` is the time cap).
    - `solver`: one of `euler, heun, midpoint, ralston, bosh3, tsit5, dopri5, dopri8,
      kvaerno5, auto`, or any `diffrax.AbstractSolver` instance that integrates one ODE
      term
      (`diffrax.Tsit5()`, `diffrax.Kvaerno3()`, `diffrax.ReversibleHeun()`, an explicit
      Runge-Kutta method with a tableau of one's own...). IMEX solvers (`Sil3`,
      `KenCarp*`, needing a `MultiTerm`) and SDE solvers are refused. `stats["solver"]`
      is the name, or the class name of an object. `"auto"` (`solvers.AutoSwitch`, needs
      rtol and atol): Tsit5 while the flow is not stiff, a matrix-free Rosenbrock-W step
      (JVPs and GMRES, no dense Jacobian) while it is (the projected flow past
      convergence); its `stats` add `jvp_evals`, `num_switches` and `implicit_steps`,
      `nfe` counts JVPs, and a batch is solved sample by sample (`lax.map`), forward
      only. Dense-Jacobian implicit solvers are refused above
      `DENSE_JACOBIAN_MAX_STATE` entries of `[N, D]`.
    - `dt0`: the constant step when the steps are constant; with adaptive steps, the
      initial step (`None`: chosen automatically).
    - `rtol`, `atol`: select PID step control (both needed; not with `euler`).
    - `stepsize_controller`: instead of `rtol`/`atol` (not with them, nor with `dtmin`),
      any diffrax controller: `diffrax.PIDController(rtol, atol, pcoeff=..., icoeff=...,
      jump_ts=..., step_ts=...)`, `diffrax.ConstantStepSize()`,
      `diffrax.ClipStepSizeController(...)`. An adaptive controller needs a solver with
      an error estimate; its plain-number fields are cast to arrays of the state's dtype
      (new values do not recompile). It is used as given: its `dtmin` (diffrax's default
      `None`: no underflow check) decides whether a stalled solve ends as
      `"dt_underflow"` or `"max_steps"`.
    - `t0`, `t1`, `dt0`, `rtol`, `atol` and the `stop`'s tolerances may be JAX tracers
      (`jax.jit`, `jax.vmap` over a horizon or a tolerance: one compilation serves the
      sweep). Their checks then run inside the program and fail at run time with the
      same messages. A constant-step solve with a traced `t0`, `t1` or `dt0` needs
      `max_steps` (its default cap is the step count, which a tracer does not give).
    - `flow`: `"native"` (the paper's) or `"projected"` (keeps each token's scale).
    - `stop`: `FixedPointStop(atol, rtol)` to stop where RMS(G) is small.
    - `save`: `"final"`, `"steps"` (t0 and every step), or an array of times.
    - `save_energy`: also record `E` at t0 and every step, without storing states.
    - `adjoint`: `"checkpoint"` (exact gradients of the discrete solve), `"backsolve"`
      (continuous adjoint; warned beyond its measured stable horizon), `"implicit"`
      (implicit-function gradient at a fixed point on the manifold: projected flow and a
      fixed-point stop; only `x_final` carries gradients).
    - `checkpoints`: for `"checkpoint"`, the number of checkpoints (`None`: diffrax's
      default; `max_steps` stores every step).
    - `max_steps`: step cap. Default: for constant steps to a fixed `t1` (no `stop`) the
      step count itself (plus one for round-off in t), and then, with the checkpoint
      adjoint and at most 64 steps, a checkpoint at every step: diffrax's checkpointing
      sized for a 4096-step cap cost 1.1x-1.5x the backward pass of a hand-written scan
      (benchmarks); exact, every-step checkpoints 0.6x-0.8x. Such a cap depends on `t1`,
      so each new horizon compiles anew: pass `max_steps` to share one compilation.
      Otherwise 4096.
    - `dtmin`: smallest adaptive step before the solve fails with `"dt_underflow"`
      (default: the larger of `1e-12 (t1 - t0)` and 16 units of round-off of the
      dtype at `max(|t0|, |t1|)`, below which `t + dt == t` in practice).
    - `implicit_tol`: GMRES tolerance for `"implicit"` (default 1e-10 in float64, 1e-5
      in float32).
    - `count_evaluations`: count every vector-field evaluation (`stats["f_evals"]`) and
      every Jacobian-vector product through it (`stats["jvp_evals"]`, e.g. an implicit
      solver's Jacobians and Newton steps) where they happen, with a host callback
      each: `stats["nfe"]` is then their exact sum for any solver, diffrax's implicit
      ones included (without it, `nfe` comes from the solver's tableau and is an
      estimate for implicit solvers: see `nfe_is_estimate`). For forward solves only
      (JAX cannot differentiate through the callbacks in reverse mode); a batch is
      solved sample by sample.
    - `throw`: raise `SolveError` on a failed solve; with `False` inspect
      `sol.stats["stop_reason"]` instead. Inside `jax.jit` or `jax.grad` a failure raises
      a runtime error without the statistics (`eqx.error_if`).

    **Returns:** an `EnergySolution`.
    """
    x0 = jnp.asarray(x0)
    traced = _is_traced((model, x0, args))
    if t1 is None:
        t1 = 1000.0 if stop is not None else 1.2
    deferred = []  # checks of traced values, run inside the program
    adaptive, preset = _validate(
        model, x0, args, solver=solver, flow=flow, adjoint=adjoint, t0=t0, t1=t1, dt0=dt0,
        rtol=rtol, atol=atol, stop=stop, save=save, save_energy=save_energy,
        max_steps=max_steps, stepsize_controller=stepsize_controller, dtmin=dtmin,
        args_batched=args_batched, traced=traced, deferred=deferred,
    )
    if max_steps is None:
        max_steps, checkpoints = _default_cap(t0, t1, dt0, rtol, atol, stop, adjoint,
                                              checkpoints, stepsize_controller)
    dtype = x0.dtype
    as_array = lambda v: jnp.asarray(v, dtype)  # noqa: E731  arrays: no recompiles
    numbers = dict(t0=as_array(t0), t1=as_array(t1))
    for ok, message in deferred:  # t0 feeds every solve: the checks run before it
        numbers["t0"] = eqx.error_if(numbers["t0"], jnp.logical_not(ok), message)
    if dt0 is not None:
        numbers["dt0"] = as_array(dt0)
    solver_object = preset.make()
    controller = (None if stepsize_controller is None
                  else _controller_in_dtype(stepsize_controller, dtype))
    if adaptive and controller is None:
        numbers.update(
            rtol=as_array(rtol), atol=as_array(atol),
            dtmin=as_array(_default_dtmin(t0, t1, dtype) if dtmin is None else dtmin),
        )
    numbers["fp_atol"] = as_array(stop.atol if stop else 0.0)
    numbers["fp_rtol"] = as_array(stop.rtol if stop else 0.0)
    save_mode = save if isinstance(save, str) else "ts"
    ts_save = None if isinstance(save, str) else as_array(save)
    cfg = _Config(
        solver=type(solver_object).__name__, flow=flow, adaptive=adaptive, save=save_mode,
        save_energy=bool(save_energy), adjoint=adjoint, max_steps=int(max_steps),
        fixed_point=stop is not None, checkpoints=checkpoints,
        batched=x0.ndim == 3, args_batched=bool(args_batched),
        # counted: host callbacks cannot run under vmap of diffrax's conditionals
        sequential=preset.self_counting or bool(count_evaluations),
        counted=bool(count_evaluations),
    )
    sample_entries = x0[0].size if cfg.batched else x0.size
    if (adaptive and not traced and max_steps > PROBE_STEPS
            and sample_entries >= PROBE_MIN_STATE):
        _probe(model, x0, args, numbers, solver_object, controller, cfg, t0, t1, max_steps,
               preset.name, rtol if rtol is not None else getattr(controller, "rtol", 0.0))
    # fresh ids on every call (arguments, not constants: no recompile)
    counters = (jnp.asarray(new_counters(x0.shape[0] if cfg.batched else 1))
                if cfg.counted else None)
    if adjoint == "implicit":

        out = _solve_core(*jax.lax.stop_gradient((model, x0, args)), numbers, ts_save,
                          solver_object, controller, cfg, counters)
        if implicit_tol is None:
            implicit_tol = 1e-10 if dtype == jnp.float64 else 1e-5
        out["x_final"] = implicit_fixed_point(
            as_manifold_system(model), x0, args, jax.lax.stop_gradient(out["x_final"]),
            tol=implicit_tol, batched=cfg.batched, args_batched=cfg.args_batched,
            lenient=not throw,
        )
    else:
        out = _solve_core(model, x0, args, numbers, ts_save, solver_object, controller, cfg,
                          counters)
    if stepsize_controller is not None and rtol is None:  # the controller's tolerances
        rtol = getattr(stepsize_controller, "rtol", None)
        atol = getattr(stepsize_controller, "atol", None)
    return _finish(out, cfg, preset, locals_for_stats=dict(
        solver=preset.name, flow=flow, adjoint=adjoint, t0=t0, t1=t1, dt0=dt0, rtol=rtol,
        atol=atol, stop=stop, dtype=str(dtype), max_steps=max_steps,
        stepsize_controller=_controller_name(stepsize_controller, adaptive)),
        jumps=getattr(stepsize_controller, "jump_ts", None) is not None,
        throw=throw, traced=traced or _is_traced(out["x_final"]))


def _finish(out, cfg: _Config, preset: SolverPreset, locals_for_stats: dict, jumps: bool,
            throw: bool, traced: bool):
    stop = locals_for_stats.pop("stop")
    stats = dict(locals_for_stats)
    stats["fixed_point_stop"] = None if stop is None else dict(atol=stop.atol, rtol=stop.rtol)
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps", "residual_rms",
                "residual_rms_initial", "stop"):
        stats[key] = out[key]
    stats["stop_code"] = stop_code(out["stop"])
    stats["fixed_point_threshold"] = out["threshold"] if stop is not None else None
    stats["nfe"] = preset.nfe(out["num_steps"])
    stats["nfe_is_estimate"] = preset.implicit or not preset.nfe_exact
    stats["nfe_note"] = preset.nfe_note
    if cfg.adaptive and preset.fsal and preset.nfe_exact and not preset.self_counting:
        # Counted (count_evaluations=True): under adaptive step control diffrax's FSAL
        # solvers make a few evaluations beyond the tableau's count (tsit5, dopri5 +1,
        # bosh3 +2 per solve, 0.3 to 5 tau); constant steps match the tableau exactly.
        stats["nfe_is_estimate"] = True
        stats["nfe_note"] = (stats["nfe_note"].replace("exact: ", "lower bound: ", 1)
                             + "; under adaptive steps diffrax makes a few more (count them "
                             "with count_evaluations=True)")
    if jumps and preset.fsal and preset.nfe_exact:  # FSAL re-evaluates after each jump
        stats["nfe_is_estimate"] = True
        stats["nfe_note"] = (
            stats["nfe_note"].replace("exact: ", "lower bound: ", 1)
            + "; the extra evaluation after each time in jump_ts crossed is not counted")
    if preset.self_counting:  # "auto": the solver's own counts, JVPs included
        own = out["own_counts"]
        rejected = out["num_rejected_steps"]
        stats["jvp_evals"] = own["jvp_evals"]
        stats["num_switches"] = own["num_switches"]
        stats["implicit_steps"] = own["implicit_steps"]
        stats["nfe"] = own["f_evals"] + own["jvp_evals"] + EXPLICIT_EVALS * rejected
        # Rejected steps before any switch are explicit (6 evaluations each, exact);
        # after one, a rejected step's mode (and cost) is not known.
        if traced:
            stats["nfe_is_estimate"] = jnp.any((rejected > 0) & (own["num_switches"] > 0))
        else:
            stats["nfe_is_estimate"] = bool(np.any(
                (np.asarray(rejected) > 0) & (np.asarray(own["num_switches"]) > 0)))
    if cfg.counted:  # counted where they happened: exact for any solver
        counts = out["counted"]
        stats["f_evals"], stats["jvp_evals"] = counts[..., 0], counts[..., 1]
        stats["nfe"] = counts[..., 0] + counts[..., 1]
        stats["nfe_is_estimate"] = False
        stats["nfe_note"] = ("exact: counted during the solve (count_evaluations=True): "
                             "f_evals vector-field evaluations plus jvp_evals "
                             "Jacobian-vector products")
    stats["residual_evals"] = out["num_steps"] + 1 if stop is not None else 0
    stats["energy_evals"] = out["num_accepted_steps"] + 1 if cfg.save_energy else 0

    ts, xs = out["ts"], out["xs"]
    energy_ts, energies = out["energy_ts"], out["energies"]
    if traced and throw:  # no Python-side check possible: fail inside the program
        failure_codes = jnp.asarray([STOP_REASONS.index(r) for r in FAILURES])
        failed = jnp.any(jnp.isin(stats["stop_code"], failure_codes))
        out["x_final"] = eqx.error_if(
            out["x_final"], failed,
            "solvers.solve failed inside jax.jit/grad (max steps, step size underflow, "
            "non-finite state, or a fixed-point stop that reached its cap); run it outside "
            "jit for the reason and statistics, or pass throw=False and read "
            "stats['stop_code'] (indices into solvers.STOP_REASONS).",
        )
    if not traced:
        codes = np.asarray(stats["stop_code"])
        stats["stop_reason"] = (
            STOP_REASONS[int(codes)] if codes.ndim == 0
            else [STOP_REASONS[int(c)] for c in codes]
        )
        if cfg.save == "steps":
            ts, xs = _trim(ts, xs)
        if cfg.save_energy:
            energy_ts, energies = _trim(energy_ts, energies)
        if throw:
            failed = [STOP_REASONS[c] for c in np.unique(codes) if STOP_REASONS[c] in FAILURES]
            if failed:
                reason = failed[0]
                n_bad = int(np.sum(codes == STOP_REASONS.index(reason)))
                where = f" ({n_bad} of {codes.size} samples)" if codes.ndim else ""
                summary = _summary(stats)
                raise SolveError(
                    reason, f"Solve failed{where}: {FAILURES[reason]}. Statistics: {summary}",
                    stats,
                )
    return EnergySolution(
        ts=ts, xs=xs, energy_ts=energy_ts, energies=energies,
        x_final=out["x_final"], t_final=out["t_final"], stats=stats,
    )


def _trim(ts, values):
    """Drop the trailing `inf` padding shared by every sample of a batch."""
    finite = np.isfinite(np.asarray(ts))
    count = int(finite.reshape(-1, finite.shape[-1]).sum(axis=-1).max())
    return ts[..., :count], values[..., :count] if values.ndim == ts.ndim else values[..., :count, :, :]


def _summary(stats: dict) -> str:
    keys = ("solver", "flow", "t1", "dt0", "rtol", "atol", "max_steps", "num_steps",
            "num_accepted_steps", "num_rejected_steps", "nfe", "residual_rms")
    parts = []
    for key in keys:
        value = stats.get(key)
        if isinstance(value, jax.Array):
            value = np.asarray(value)
            value = value.item() if value.ndim == 0 else f"max {value.max():.4g}"
        parts.append(f"{key}={value}")
    return ", ".join(parts)
