"""Overshoot of a node anomaly detector: its test AUC and the energy against time, from
the start to far past the horizon it was trained at."""

import jax
import jax.numpy as jnp
import numpy as np

from et_ode import solvers
from et_ode.tasks import roc_auc

from ._common import log_times
from ._plotting import figure, finish


def graph_overshoot(model, features, senders, receivers, labels, nodes, *,
                    t_max_factor: float = 100.0, n_times: int = 24,
                    t_first: float | None = None, **overrides) -> dict:
    """The readout of a `NodeAnomalyET` applied to its state at times past its
    training horizon: does the AUC on `nodes` (the test nodes) hold, fall or rise?

    **Arguments:** the model; the graph as `features [N, F]` (standardised as in
    training), `senders`, `receivers` `[E]`, `labels [N]`; `nodes`: indices scored;
    `t_max_factor`: the end as a multiple of the model's `dynamics.t1`; `n_times`,
    `t_first` (default horizon / 100): log-spaced sample times, plus 0 and the horizon;
    `**overrides`: `solvers.solve` options replacing the model's dynamics.

    **Returns:** a dict: `times [T]`, `auc [T]`, `energy [T]`, `horizon`, `t_max`,
    `auc_at_horizon`, `auc_at_end`, `best_time`, `best_auc`, `solve_options`.
    """
    horizon = float(model.dynamics.t1)
    t_max = t_max_factor * horizon
    times = log_times(t_first or horizon / 100, t_max, n_times, include=[horizon], start=0.0)
    options = model.dynamics.solve_options() | overrides
    options.pop("stop", None)
    options.update(t1=t_max, save=jnp.asarray(times))
    if options.get("rtol") is None:  # constant steps: a cap of the exact step count
        options["max_steps"] = solvers.constant_step_count(0.0, t_max, options["dt0"])
    x0 = model.encode(features)
    conditions = model.conditions(senders, receivers, x0.shape[0])
    sol = solvers.solve(model.core, x0, args=conditions, **options)
    states = sol.xs
    scores = np.asarray(jax.vmap(lambda x: model.scores_of_states(x0, x))(states))
    energy = np.asarray(jax.vmap(lambda x: model.core.energy(x, conditions))(states))
    labels, nodes = np.asarray(labels), np.asarray(nodes)
    auc = np.array([roc_auc(labels[nodes], s[nodes]) for s in scores])
    at = int(np.argmin(np.abs(times - horizon)))
    best = int(np.argmax(auc))
    return {"times": times, "auc": auc, "energy": energy, "horizon": horizon, "t_max": t_max,
            "auc_at_horizon": float(auc[at]), "auc_at_end": float(auc[-1]),
            "best_time": float(times[best]), "best_auc": float(auc[best]),
            "solve_options": {k: v for k, v in options.items() if k != "save"}}


def plot_graph_overshoot(result: dict, path=None):
    """Test AUC (left) and energy (right) against time on a log axis, the training
    horizon marked. Returns the `Figure`."""
    fig, axes = figure(2, 1)
    times = np.asarray(result["times"], float)
    shown = times > 0
    for ax, key, label in ((axes[0, 0], "auc", "test AUC"),
                           (axes[0, 1], "energy", "energy E of the core")):
        ax.plot(times[shown], np.asarray(result[key], float)[shown], "-o", ms=3)
        ax.set_xscale("log")
        ax.axvline(result["horizon"], color="grey", ls="--", lw=1, label="training horizon")
        ax.set_xlabel("t (tau)")
        ax.set_ylabel(label)
        ax.legend(loc="best", fontsize=8)
    return finish(fig, path)
