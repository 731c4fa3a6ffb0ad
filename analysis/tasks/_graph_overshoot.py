"""Overshoot of a node anomaly detector: its test AUC and the energy against time, from
the start to far past the horizon it was trained at."""

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, Integer

from et_ode import solvers
from et_ode.tasks import NodeAnomalyET, roc_auc

from .._common import log_times
from .._geometry import require
from .._records import metadata, model_dtype
from ._task_records import GraphOvershoot, recorded_options


def graph_overshoot(
    model: NodeAnomalyET,
    features: Float[Array, "N F"],
    senders: Int[Array, " E"],
    receivers: Int[Array, " E"],
    labels: Integer[ArrayLike, " N"],
    nodes: Integer[ArrayLike, " M"],
    *,
    t_max_factor: float = 100.0,
    n_times: int = 24,
    t_first: float | None = None,
    options: solvers.SolveOptions | None = None,
) -> GraphOvershoot:
    """The readout of a `NodeAnomalyET` applied to its state at times past its
    training horizon: does the AUC on `nodes` (the test nodes) hold, fall or rise?

    **Arguments:** the model; the graph as `features [N, F]` (standardised as in
    training), `senders`, `receivers` `[E]`, `labels [N]`; `nodes`: indices scored;
    `t_max_factor`: the end as a multiple of the model's `dynamics.t1`; `n_times`,
    `t_first` (default horizon / 100): log-spaced sample times, plus 0 and the horizon;
    `options`: how to solve, a `solvers.SolveOptions` (None: the model's own,
    `model.dynamics.options`), with constant steps capped at the exact step count to
    the end; the model's fixed-point stop is dropped (the run passes every sample time)
    and its adjoint kept.

    **Returns:** a `GraphOvershoot` (its fields say what each holds).

    **Protocol:** a `NodeAnomalyET` (`encode`, `conditions`, `scores_of_states`,
    `dynamics`, `core`); another model is refused up front, before any solve.
    """
    require(model, "graph_overshoot")
    horizon = float(model.dynamics.t1)
    t_max = t_max_factor * horizon
    times = log_times(t_first or horizon / 100, t_max, n_times, include=[horizon], start=0.0)
    options = model.dynamics.options if options is None else options
    if not isinstance(options, solvers.SolveOptions):
        raise TypeError(
            f"options must be a solvers.SolveOptions or None (got {type(options).__name__})."
        )
    if not options.adaptive:  # constant steps: a cap of the exact step count
        options = options.replace(max_steps=solvers.constant_step_count(0.0, t_max, options.dt0))
    x0 = model.encode(features)
    conditions = model.conditions(senders, receivers, x0.shape[0])
    sol = solvers.solve(
        model.core,
        x0,
        args=conditions,
        options=options,
        t1=t_max,
        save=jnp.asarray(times),
        adjoint=model.dynamics.adjoint,
    )
    states = sol.xs
    scores = np.asarray(jax.vmap(lambda x: model.scores_of_states(x0, x))(states))
    energy = np.asarray(jax.vmap(lambda x: model.core.energy(x, conditions))(states))
    labels, nodes = np.asarray(labels), np.asarray(nodes)
    auc = np.array([roc_auc(labels[nodes], s[nodes]) for s in scores])
    at = int(np.argmin(np.abs(times - horizon)))
    best = int(np.argmax(auc))
    solve_options = recorded_options(options, t1=t_max, adjoint=model.dynamics.adjoint)
    return GraphOvershoot(
        times=times,
        auc=auc,
        energy=energy,
        horizon=horizon,
        t_max=t_max,
        auc_at_horizon=float(auc[at]),
        auc_at_end=float(auc[-1]),
        best_time=float(times[best]),
        best_auc=float(auc[best]),
        solve_options=solve_options,
        metadata=metadata(
            study="graph_overshoot",
            dtype=model_dtype(model.core),
            t_max_factor=t_max_factor,
            horizon=horizon,
            t_max=t_max,
            n_nodes=int(labels.size),
            n_scored=int(nodes.size),
            solve_options=solve_options,
        ),
    )
