"""`solve`: integrate an energy system with diffrax (its plumbing lives in `._plumbing`, the
checks of its options and inputs in `._options` and `._validate`, the defaults the options
imply in `._defaults`, its statistics in `._statistics`)."""

import dataclasses
from typing import Any, cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from et_ode.vocab import Adjoint, Flow, Noise

from ._blowup import blowup_note
from ._counting import new_counters
from ._crawl import PROBE_MIN_STATE, PROBE_STEPS, warn_if_crawling
from ._defaults import (
    controller_in_dtype,
    controller_name,
    default_cap,
    default_dtmin,
    is_traced,
)
from ._implicit import default_implicit_tol, implicit_fixed_point
from ._options import Save, SolveOptions, merge_options
from ._plumbing import SolveConfig, solve_core
from ._protocol import (
    EnergySystem,
    InitialState,
    RealScalar,
    as_manifold_system,
    batched_args_axes,
)
from ._sde import Brownian, langevin
from ._solution import EnergySolution
from ._statistics import finish_solution
from ._stop import FixedPointStop, PassageStop
from ._validate import validate


def _probe(model, x0, args, numbers, solver, controller, cfg, t0, t1, max_steps, name, rtol):
    """`PROBE_STEPS` steps of this solve on its first sample, and a `SlowSolveWarning`
    where their mean step would not reach `t1` within `max_steps` (`solvers._crawl`)."""
    one = dataclasses.replace(
        cfg,
        max_steps=PROBE_STEPS,
        save="final",
        save_energy=False,
        adjoint="checkpoint",
        checkpoints=None,
        batched=False,
        args_batched=False,
        sequential=False,
        counted=False,
    )
    x_one = x0[0] if cfg.batched else x0
    a_one = (
        jax.tree.map(
            lambda leaf, axis: leaf if axis is None else leaf[0], args, batched_args_axes(args)
        )
        if cfg.args_batched
        else args
    )
    warn_if_crawling(
        lambda: solve_core(model, x_one, a_one, numbers, None, solver, controller, one),
        t0=t0,
        t1=t1,
        max_steps=max_steps,
        entries=x_one.size,
        solver=name,
        rtol=rtol,
    )


def solve(
    model: EnergySystem,
    x0: InitialState,
    *,
    options: SolveOptions | None = None,
    args: Any = None,
    t0: RealScalar = 0.0,
    t1: RealScalar | None = None,
    solver: str | diffrax.AbstractSolver = "euler",
    dt0: RealScalar | None = 0.1,
    rtol: RealScalar | None = None,
    atol: RealScalar | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    flow: Flow = "native",
    stop: FixedPointStop | PassageStop | None = None,
    save: Save = "final",
    save_energy: bool = False,
    adjoint: Adjoint = "checkpoint",
    checkpoints: int | None = None,
    max_steps: int | None = None,
    dtmin: float | None = None,
    args_batched: bool = False,
    implicit_tol: float | None = None,
    throw: bool = True,
    count_evaluations: bool = False,
    temperature: langevin.Temperature = None,
    key: Any = None,
    noise: Noise | None = None,
    brownian: str | Brownian | None = None,
) -> EnergySolution:
    """Integrate `tau dx/dt = -dE/dg` (or its projection) from `x0`.

    The defaults reproduce the paper: 12 explicit Euler steps of 0.1 to `t1 = 1.2`, native
    flow, gradients by checkpointed backpropagation through the steps.

    **Arguments:**

    - `model`: a `solvers.EnergySystem` (for instance `et_ode.EnergyTransformer`).
    - `x0`: initial tokens, `[N, D]` or a batch `[B, N, D]` (solved with `jax.vmap`).
    - `options`: a `SolveOptions` holding `solver`, `dt0`, `rtol`, `atol`,
      `stepsize_controller`, `max_steps`, `dtmin` and `flow` in one object (what every
      study takes): instead of those keywords, which are then left at their defaults
      (one given beside it is refused).
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
      `DENSE_MAX` entries of `[N, D]`.
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
    - `stop`: `FixedPointStop(atol, rtol)` to stop where RMS(G) is small, or
      `PassageStop(condition)` to stop each sample at the end of the first step where
      `condition(x, args)` holds (reason `"passage"`; one that never does ends at `t1`).
    - `save`: `"final"`, `"steps"` (t0 and every step), or an array of times (the
      solver's dense output there; `solver="auto"` interpolates linearly between its
      steps, not to the tolerances).
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
      sized for a 4096-step cap costs more than exact every-step checkpoints (docs:
      benchmarks, the gradient rows). Such a cap depends on `t1`,
      so each new horizon compiles anew: pass `max_steps` to share one compilation.
      Otherwise 4096.
    - `dtmin`: smallest adaptive step before the solve fails with `"dt_underflow"`
      (positive and finite; refused with constant steps, where it would mean nothing;
      default: the larger of `1e-12 (t1 - t0)` and 16 units of round-off of the
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
    - `temperature`: `T >= 0` (a number, a traced scalar, or a schedule `T(t)`: a
      function of the time): the flow becomes the Langevin SDE `dx = f(x) dt +
      sqrt(2 T / tau) sigma(x) o dW`, solved by diffrax (docs: mathematics, "At a
      temperature"). `None` or `0`: the ODE itself, bit for bit. The solver is then an
      SDE solver: a name (`euler` is Euler-Maruyama; `heun`, `midpoint`, `milstein`,
      `euler_heun`; for additive noise `sea`, `shark`, `sra1`; `general_shark`; `spark`,
      adaptive with rtol and atol) or a diffrax SDE solver object. Every solver
      converges to the same (Stratonovich) SDE: Ito ones get the drift correction.
      No fixed-point `stop` (a noisy path does not settle), `adjoint="checkpoint"` only,
      no `count_evaluations`.
    - `key`: the noise's seed, needed with a temperature (`jax.random.key(0)`); sample
      `i` of a batch draws with `jax.random.fold_in(key, i)`, so it equals the
      one-sample solve with that key, whatever the batch size or sharding.
    - `noise`: `"isotropic"` (white noise on every free coordinate of `x`: the authors'
      graph code; the default for the native flow) or `"tangent"` (in the LayerNorm
      manifold's tangent space, scaled by the root of the mobility; the default and the
      only choice for the projected flow): with it, `g` samples `exp(-E/T)`.
    - `brownian`: the Brownian path (`solvers.Brownian`): `"step"` (an increment per
      step, the default for constant steps), `"tree"` (`diffrax.VirtualBrownianTree`:
      the same path under refinement; the default and the only choice for adaptive
      steps) or `"key_chain"` (the authors' sequence of keys, constant steps).
    - `throw`: raise `SolveError` on a failed solve; with `False` inspect
      `sol.stats["stop_reason"]` instead. Inside `jax.jit` or `jax.grad` a failure raises
      a runtime error without the statistics (`eqx.error_if`).

    **Returns:** an `EnergySolution`.
    """
    given = merge_options(
        options,
        dict(
            solver=solver,
            dt0=dt0,
            rtol=rtol,
            atol=atol,
            stepsize_controller=stepsize_controller,
            max_steps=max_steps,
            dtmin=dtmin,
            flow=flow,
        ),
    )
    solver, dt0, rtol, atol = given["solver"], given["dt0"], given["rtol"], given["atol"]
    stepsize_controller, max_steps = given["stepsize_controller"], given["max_steps"]
    dtmin, flow = given["dtmin"], given["flow"]
    x0 = jnp.asarray(x0)
    traced = is_traced((model, x0, args))
    passage = stop if isinstance(stop, PassageStop) else None
    # the fixed-point machinery sees only a FixedPointStop (or what it refuses)
    fixed = cast(FixedPointStop | None, None if passage is not None else stop)
    if passage is not None:
        if adjoint != "checkpoint":
            raise ValueError(
                f"a PassageStop is a diffrax event, which adjoint={adjoint!r} cannot take: use "
                "adjoint='checkpoint'."
            )

    if t1 is None:
        t1 = 1000.0 if fixed is not None else 1.2
    deferred: list[tuple[Any, str]] = []  # checks of traced values, run inside the program
    noisy = langevin.is_active(temperature)
    if noisy:
        langevin.check_temperature(temperature, key, deferred)
        _refuse_at_temperature(fixed, adjoint, count_evaluations)
    elif temperature is None and (noise is not None or brownian is not None):
        raise ValueError(
            "noise and brownian shape the noise of a solve at a temperature: pass "
            "temperature=T and key=... with them (or drop them)."
        )
    adaptive, preset = validate(
        model,
        x0,
        args,
        solver=solver,
        flow=flow,
        adjoint=adjoint,
        t0=t0,
        t1=t1,
        dt0=dt0,
        rtol=rtol,
        atol=atol,
        stop=fixed,
        save=save,
        save_energy=save_energy,
        max_steps=max_steps,
        stepsize_controller=stepsize_controller,
        dtmin=dtmin,
        args_batched=args_batched,
        traced=traced,
        deferred=deferred,
        sde=noisy,
    )
    if max_steps is None:
        max_steps, checkpoints = default_cap(
            t0, t1, dt0, rtol, atol, fixed, adjoint, checkpoints, stepsize_controller
        )
    dtype = x0.dtype
    as_array = lambda v: jnp.asarray(v, dtype)  # noqa: E731  arrays: no recompiles
    numbers = dict(t0=as_array(t0), t1=as_array(t1))
    for ok, message in deferred:  # t0 feeds every solve: the checks run before it
        numbers["t0"] = eqx.error_if(numbers["t0"], jnp.logical_not(ok), message)
    if dt0 is not None:
        numbers["dt0"] = as_array(dt0)
    solver_object = preset.make()
    controller = (
        None if stepsize_controller is None else controller_in_dtype(stepsize_controller, dtype)
    )
    if adaptive and controller is None:
        numbers.update(
            rtol=as_array(rtol),
            atol=as_array(atol),
            dtmin=as_array(default_dtmin(t0, t1, dtype) if dtmin is None else dtmin),
        )
    numbers["fp_atol"] = as_array(fixed.atol if fixed else 0.0)
    numbers["fp_rtol"] = as_array(fixed.rtol if fixed else 0.0)
    save_mode = save if isinstance(save, str) else "ts"
    ts_save = None if isinstance(save, str) else as_array(save)
    noise_cfg, keys, noise_stats = None, None, {}
    if noisy:
        noise_cfg, keys, noise_stats = langevin.NoiseRequest(
            temperature, key, noise, brownian
        ).configure(model, x0, numbers, solver_object, flow, adaptive, int(max_steps))
    cfg = SolveConfig(
        solver=type(solver_object).__name__,
        flow=flow,
        adaptive=adaptive,
        save=save_mode,
        save_energy=bool(save_energy),
        adjoint=adjoint,
        max_steps=int(max_steps),
        fixed_point=fixed is not None,
        checkpoints=checkpoints,
        batched=x0.ndim == 3,
        args_batched=bool(args_batched),
        # counted: host callbacks cannot run under vmap of diffrax's conditionals
        sequential=preset.self_counting or bool(count_evaluations),
        counted=bool(count_evaluations),
        noise=noise_cfg,
        passage=None if passage is None else passage.condition,
    )
    sample_entries = x0[0].size if cfg.batched else x0.size
    if (
        adaptive
        and not noisy
        and not traced
        and max_steps > PROBE_STEPS
        and sample_entries >= PROBE_MIN_STATE
    ):
        _probe(
            model,
            x0,
            args,
            numbers,
            solver_object,
            controller,
            cfg,
            t0,
            t1,
            max_steps,
            preset.name,
            rtol if rtol is not None else getattr(controller, "rtol", 0.0),
        )
    # fresh ids on every call (arguments, not constants: no recompile)
    counters = jnp.asarray(new_counters(x0.shape[0] if cfg.batched else 1)) if cfg.counted else None
    if adjoint == "implicit":
        out = solve_core(
            *jax.lax.stop_gradient((model, x0, args)),
            numbers,
            ts_save,
            solver_object,
            controller,
            cfg,
            counters,
        )
        if implicit_tol is None:
            implicit_tol = default_implicit_tol(dtype)
        out["x_final"] = implicit_fixed_point(
            as_manifold_system(model),
            x0,
            args,
            jax.lax.stop_gradient(out["x_final"]),
            tol=implicit_tol,
            batched=cfg.batched,
            args_batched=cfg.args_batched,
            lenient=not throw,
        )
    else:
        out = solve_core(
            model, x0, args, numbers, ts_save, solver_object, controller, cfg, counters, keys
        )
    if stepsize_controller is not None and rtol is None:  # the controller's tolerances
        rtol = getattr(stepsize_controller, "rtol", None)
        atol = getattr(stepsize_controller, "atol", None)
    return finish_solution(
        out,
        cfg,
        preset,
        locals_for_stats=dict(
            solver=preset.name,
            flow=flow,
            adjoint=adjoint,
            t0=t0,
            t1=t1,
            dt0=dt0,
            rtol=rtol,
            atol=atol,
            stop=fixed,
            dtype=str(dtype),
            max_steps=max_steps,
            stepsize_controller=controller_name(stepsize_controller, adaptive),
            **noise_stats,
            **(
                {}
                if passage is None
                else {"passage_stop": getattr(passage.condition, "__name__", "condition")}
            ),
        ),
        jumps=getattr(stepsize_controller, "jump_ts", None) is not None,
        throw=throw,
        traced=traced or is_traced(out["x_final"]),
        # evaluated only where a solve failed before t1
        failure_note=lambda out, failed: blowup_note(
            model, x0, out["x_final"], t0, out["t_final"], args, flow, failed, cfg.args_batched
        ),
    )


def _refuse_at_temperature(stop, adjoint, count_evaluations) -> None:
    if stop is not None:
        raise ValueError(
            "a solve at a temperature has no fixed point to stop at (the noise keeps the "
            "state moving): stop at a first passage with solvers.PassageStop(condition), "
            "or solve at temperature=0."
        )
    if adjoint != "checkpoint":
        raise ValueError(
            f"adjoint={adjoint!r} is not defined for a solve at a temperature: use "
            "adjoint='checkpoint' (exact gradients of the discrete noisy solve)."
        )
    if count_evaluations:
        raise ValueError(
            "count_evaluations counts the evaluations of an ODE solve; a solve at a "
            "temperature reports its drift evaluations in stats['nfe']."
        )
