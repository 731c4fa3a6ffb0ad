"""The diffrax plumbing of `solve`: the configuration that shapes the compiled program,
the flow terms (counted or not), what is saved, one solve and its batched form."""

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from et_ode.vocab import Adjoint, Flow

from . import _traced_once as traced_once
from ._auto import AutoSwitch
from ._counting import counted_call, read_counts
from ._protocol import batched_args_axes
from ._sde import langevin
from ._solution import StopReason, reason_item
from ._stop import passage_event, residual_event, rms


@dataclasses.dataclass(frozen=True)
class SolveConfig:
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
    # A solve at a temperature (`solve(..., temperature=T, key=key)`): an SDE.
    noise: langevin.NoiseConfig | None = None
    # A `PassageStop`'s condition: each sample stops at its first passage.
    passage: Callable | None = None


class _FlowTerm(eqx.Module):
    """The vector field as a PyTree holding the model, so that adjoints see its
    parameters. diffrax `args` are `(model_args, fixed_point_threshold)`."""

    model: Any
    flow: Flow = eqx.field(static=True)

    def __call__(self, t, y, args):
        return traced_once.vector_field(self.model, t, y, args[0], self.flow)


def _native_field(model, t, y, args):
    return traced_once.like_state(model.vector_field(t, y, args[0], "native"), y, "vector_field")


def _projected_field(model, t, y, args):
    return traced_once.like_state(model.vector_field(t, y, args[0], "projected"), y, "vector_field")


# static, hashable functions for `counted_call` (one per flow: no retrace per solve)
_FIELDS = {"native": _native_field, "projected": _projected_field}


class _CountedFlowTerm(eqx.Module):
    """`_FlowTerm` whose every evaluation and JVP is reported to `counter`."""

    model: Any
    counter: jax.Array
    flow: Flow = eqx.field(static=True)

    def __call__(self, t, y, args):
        return counted_call(_FIELDS[self.flow], self.counter, self.model, t, y, args)


def _saveat(cfg: SolveConfig, ts_save, model, solver_state=False):
    # With steps=True diffrax saves the last step in the steps block, not in a t1 slot.
    # solver_state: the final solver state (a self-counting solver's counters).
    main: dict[str, Any] = dict(t1=True)
    if cfg.save == "steps":
        main = dict(t0=True, steps=True)
    elif cfg.save == "ts":
        main.update(ts=ts_save)
    if not cfg.save_energy:
        return diffrax.SaveAt(**main, solver_state=solver_state)
    energy = diffrax.SubSaveAt(
        t0=True, steps=True, fn=lambda t, y, args: traced_once.energy(model, y, args[0])
    )
    return diffrax.SaveAt(subs=[diffrax.SubSaveAt(**main), energy], solver_state=solver_state)


def solve_one(
    model, x0, args, numbers, ts_save, solver, controller, cfg: SolveConfig, counter=None, key=None
):
    """One sample: diffrax solve plus the numbers the wrapper needs. Traceable.
    `controller`: the caller's step-size controller, or `None` for the shortcuts (PID
    step control from `rtol`/`atol`, else constant steps); `counter`: its id when
    `cfg.counted`; `key`: the sample's noise key when `cfg.noise` (a solve at a
    temperature)."""
    if controller is None and cfg.adaptive:
        controller = diffrax.PIDController(
            rtol=numbers["rtol"],
            atol=numbers["atol"],
            dtmin=numbers["dtmin"],
            force_dtmin=False,
        )
    elif controller is None:
        controller = diffrax.ConstantStepSize()
    counting = isinstance(solver, AutoSwitch)
    if counting and cfg.adaptive and "rtol" in numbers and solver.rtol is None:
        # the rtol/atol shortcut: the solver rescales its implicit error with them
        solver = eqx.tree_at(
            lambda s: (s.rtol, s.atol),
            solver,
            (numbers["rtol"], numbers["atol"]),
            is_leaf=lambda x: x is None,
        )
    adjoint: diffrax.AbstractAdjoint
    if cfg.adjoint == "backsolve":
        # throw=True: the backward solve has no stop code to report, so running out of
        # steps there must raise rather than return silently wrong gradients.
        adjoint = diffrax.BacksolveAdjoint(
            solver=solver, stepsize_controller=controller, throw=True
        )
    else:
        adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=cfg.checkpoints)

    g0 = rms(traced_once.residual(model, x0, args))
    threshold = jnp.maximum(numbers["fp_atol"], numbers["fp_rtol"] * g0)
    terms: diffrax.AbstractTerm
    if cfg.noise is not None:
        shape = jax.ShapeDtypeStruct(x0.shape, x0.dtype)
        terms = langevin.terms(model, cfg.flow, cfg.noise, key, numbers, shape)
        solve_args: tuple = (args, threshold, numbers.get("temperature"))
    else:
        field = (
            _CountedFlowTerm(model, counter, cfg.flow)
            if cfg.counted
            else _FlowTerm(model, cfg.flow)
        )
        terms, solve_args = diffrax.ODETerm(field), (args, threshold)
    sol = diffrax.diffeqsolve(
        terms,
        solver,
        numbers["t0"],
        numbers["t1"],
        numbers["dt0"] if "dt0" in numbers else None,
        x0,
        args=solve_args,
        saveat=_saveat(cfg, ts_save, model, solver_state=counting),
        stepsize_controller=controller,
        adjoint=adjoint,
        event=_event(model, cfg),
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
    g_final = rms(traced_once.residual(model, jax.lax.stop_gradient(x_final), args))
    finite = jnp.all(jnp.isfinite(x_final))
    reason = reason_item("t1")
    if cfg.fixed_point:
        reason = StopReason.where(
            g_final <= threshold, reason_item("fixed_point"), reason_item("not_converged")
        )
    if cfg.passage is not None:
        reason = StopReason.where(
            sol.result == diffrax.RESULTS.event_occurred, reason_item("passage"), reason
        )
    reason = StopReason.where(
        sol.result == diffrax.RESULTS.max_steps_reached, reason_item("max_steps"), reason
    )
    reason = StopReason.where(
        sol.result == diffrax.RESULTS.dt_min_reached, reason_item("dt_underflow"), reason
    )
    reason = StopReason.where(finite, reason, reason_item("nonfinite"))
    return dict(
        ts=ts,
        xs=xs,
        energy_ts=energy_ts,
        energies=energies,
        x_final=x_final,
        t_final=t_final,
        num_steps=sol.stats["num_steps"],
        num_accepted_steps=sol.stats["num_accepted_steps"],
        num_rejected_steps=sol.stats["num_rejected_steps"],
        residual_rms=g_final,
        residual_rms_initial=g0,
        threshold=threshold,
        stop=reason,
        own_counts=None
        if not counting
        else dict(
            f_evals=sol.solver_state.f_evals,
            jvp_evals=sol.solver_state.jvp_evals,
            num_switches=sol.solver_state.num_switches,
            implicit_steps=sol.solver_state.implicit_steps,
        ),
        counted=read_counts(counter, x_final) if cfg.counted else None,
    )


def _event(model, cfg: SolveConfig) -> diffrax.Event | None:
    if cfg.fixed_point:
        return residual_event(model)
    if cfg.passage is not None:
        return passage_event(cfg.passage)
    return None


@eqx.filter_jit
def solve_core(
    model,
    x0,
    args,
    numbers,
    ts_save,
    solver,
    controller,
    cfg: SolveConfig,
    counters=None,
    keys=None,
):
    """`solve_one` on one sample or a batch (`vmap`, or `lax.map` when `cfg.sequential`).
    `keys`: at a temperature, the sample's key, or one per sample of a batch."""
    if cfg.noise is not None:

        def noisy(x, a, key):
            return solve_one(model, x, a, numbers, ts_save, solver, controller, cfg, None, key)

        if not cfg.batched:
            return noisy(x0, args, keys)
        axes = batched_args_axes(args) if cfg.args_batched else None
        return jax.vmap(noisy, in_axes=(0, axes, 0))(x0, args, keys)

    def fn(x, a, counter=None):
        return solve_one(model, x, a, numbers, ts_save, solver, controller, cfg, counter)

    if cfg.batched and cfg.sequential:

        def sample(i):  # batched args: as batched_args_axes, array leaves on axis 0
            a = (
                args
                if not cfg.args_batched
                else jax.tree.map(lambda leaf: leaf[i] if jnp.ndim(leaf) > 0 else leaf, args)
            )
            return fn(x0[i], a, None if counters is None else counters[i])

        return jax.lax.map(sample, jnp.arange(x0.shape[0]))
    if cfg.counted:
        return fn(x0, args, counters[0])
    if cfg.batched:
        fn = jax.vmap(fn, in_axes=(0, batched_args_axes(args) if cfg.args_batched else None))
    return fn(x0, args)
