"""Row 16, noisy: the paper's solve at the authors' temperature (Euler-Maruyama, dt 0.1,
12 steps, isotropic noise of standard deviation 0.02: `tasks.authors_temperature()`),
forward, on the whole batch, against a hand-written `jax.lax.scan` of the authors' update
`x <- x - dt dE/dg + sqrt(dt) N(0, 0.02^2)` drawing its noise with `jax.random.normal` per
step (one key per sample and step, as `solve`'s step path does). Beside it, the same solve
on `diffrax.VirtualBrownianTree` (`brownian="tree"`), whose path does not depend on the
steps, against the per-step increments that `solve` uses by default for constant steps."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from et_ode import solvers, tasks

from ._common import pair_ratio, row, spread, time_interleaved

FAMILY = "noisy"
DT, STEPS = 0.1, 12
GOAL = 1.2


def hand_scan(model, x0, key, dt=DT, steps=STEPS):
    """The authors' noisy update, written out, each sample with its own noise (the key
    folded with the sample's index, then with the step's, as `solve`'s step path)."""
    std = jnp.sqrt(2 * tasks.authors_temperature() / model.tau).astype(x0.dtype)
    field = jax.vmap(lambda x: model.vector_field(0.0, x, None, "native"))
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(x0.shape[0]))

    def body(x, step):
        noise = jax.vmap(
            lambda k: jax.random.normal(jax.random.fold_in(k, step), x0.shape[1:], x0.dtype)
        )(keys)
        return x + dt * field(x) + std * jnp.sqrt(jnp.asarray(dt, x0.dtype)) * noise, None

    return jax.lax.scan(body, x0, jnp.arange(steps))[0]


def noisy_solve(model, x0, key, brownian="step"):
    return solvers.solve(
        model,
        x0,
        solver="euler",
        dt0=DT,
        t1=DT * STEPS,
        temperature=tasks.authors_temperature(),
        key=key,
        brownian=brownian,
    ).x_final


def tree_solve(model, x0, key):
    return noisy_solve(model, x0, key, brownian="tree")


def run(problem, opts) -> list[dict]:
    model, x0 = problem.core, problem.x0
    key = jax.random.key(0)
    calls: dict[str, Any] = {
        "scan": eqx.filter_jit(hand_scan),
        "step": eqx.filter_jit(noisy_solve),
        "tree": eqx.filter_jit(tree_solve),
    }
    # correctness first: the scan draws the noise the step path draws
    diff = float(jnp.max(jnp.abs(calls["scan"](model, x0, key) - calls["step"](model, x0, key))))
    repeats = opts.reps(3 if opts.quick else None)
    times = time_interleaved(
        {name: (lambda f=f: f(model, x0, key)) for name, f in calls.items()},
        repeats if opts.quick else max(repeats, 15),
        budget=30.0,
    )
    shape = f"[{problem.batch},{problem.n_tokens},{problem.dim}]"
    ratio = pair_ratio(times, "step", "scan")
    met = bool(ratio["median"] <= GOAL)
    note = "per-step increments (solvers.StepPath), forward inside jit"
    if not met:
        note += (
            f"; {spread(times['step'])['median'] * 1e3:.1f} ms against "
            f"{spread(times['scan'])['median'] * 1e3:.1f} ms"
        )
    tree = pair_ratio(times, "tree", "step")
    return [
        row(
            FAMILY,
            "euler-maruyama 12 steps at the authors' noise (0.02), forward",
            value=ratio["median"],
            unit="x",
            reference=f"lax.scan with jax.random.normal per step {shape}",
            spread_=ratio,
            goal=f"<= {GOAL}",
            met=met,
            note=note,
            seconds=spread(times["step"]),
            reference_seconds=spread(times["scan"]),
            max_abs_diff_vs_scan=diff,
        ),
        row(
            FAMILY,
            "the same on a VirtualBrownianTree (brownian='tree')",
            value=tree["median"],
            unit="x",
            reference="the per-step increments (brownian='step')",
            spread_=tree,
            goal="reported",
            met=None,
            note="the tree's path does not depend on the steps (refinement, adaptive steps)",
            seconds=spread(times["tree"]),
            reference_seconds=spread(times["step"]),
        ),
    ]
