"""Row 1, solver overhead: `solvers.solve` (diffrax Euler, dt 0.1, 12 steps) against a
hand-written `jax.lax.scan` of the same update `x <- x + dt * vector_field(x)`, on the
whole batch, forward and forward + backward (gradient of a sum of squares of the end
state with respect to the model's parameters; checkpoint adjoint). `solve`'s defaults
size its step cap and checkpoints to the 12 steps; the same solve with a 4096-step cap
(the default before) is measured beside it."""

import equinox as eqx
import jax
import jax.numpy as jnp

from et_ode import solvers

from ._common import pair_ratio, paper_solve, row, spread, time_interleaved

FAMILY = "overhead"
DT, STEPS = 0.1, 12
GOAL = 1.05


def hand_scan(model, x0, dt=DT, steps=STEPS):
    """The paper's update, written out: `steps` Euler steps of the native flow."""
    field = jax.vmap(lambda x: model.vector_field(0.0, x, None, "native"))

    def body(x, _):
        return x + dt * field(x), None

    return jax.lax.scan(body, x0, None, length=steps)[0]


def solve_final(model, x0, **options):
    return solvers.solve(model, x0, solver="euler", dt0=DT, t1=DT * STEPS, **options).x_final


def run(problem, opts) -> list[dict]:
    model, x0 = problem.core, problem.x0
    wide_cap = dict(max_steps=4096)

    fwd = {"scan": eqx.filter_jit(hand_scan), "solve": paper_solve}

    def sum_squares(final):
        return lambda m, x: jnp.sum(final(m, x) ** 2)

    grad = {
        "scan": eqx.filter_jit(eqx.filter_grad(sum_squares(hand_scan))),
        "solve": eqx.filter_jit(eqx.filter_grad(sum_squares(solve_final))),
    }
    if not opts.quick:
        grad["solve_4096"] = eqx.filter_jit(
            eqx.filter_grad(sum_squares(lambda m, x: solve_final(m, x, **wide_cap)))
        )
    # correctness first: the two forward maps agree (float32 round-off)
    diff = float(jnp.max(jnp.abs(fwd["scan"](model, x0) - fwd["solve"](model, x0))))
    g_scan = grad["scan"](model, x0)
    g_solve = grad["solve"](model, x0)
    g_diff = max(
        float(jnp.max(jnp.abs(a - b)) / (jnp.max(jnp.abs(a)) + 1e-30))
        for a, b in zip(jax.tree.leaves(g_scan), jax.tree.leaves(g_solve))
    )

    repeats = opts.reps(3 if opts.quick else None)
    forward = {
        "fwd scan": lambda: fwd["scan"](model, x0),
        "fwd solve (jit)": lambda: fwd["solve"](model, x0),
        "fwd solve (eager call)": lambda: solve_final(model, x0),
    }
    backward = {
        "grad scan": lambda: grad["scan"](model, x0),
        "grad solve": lambda: grad["solve"](model, x0),
    }
    if "solve_4096" in grad:
        backward["grad solve cap 4096"] = lambda: grad["solve_4096"](model, x0)
    # forward calls are cheap: more rounds, for a tighter median
    times = time_interleaved(forward, repeats if opts.quick else max(repeats, 15), budget=20.0)
    times |= time_interleaved(backward, repeats, budget=30.0)
    shape = f"[{problem.batch},{problem.n_tokens},{problem.dim}]"
    rows = []
    specs = [
        (
            "forward, solve inside jit",
            "fwd solve (jit)",
            "fwd scan",
            "the user's own jax.jit around solve",
        ),
        (
            "forward, solve called eagerly",
            "fwd solve (eager call)",
            "fwd scan",
            "includes solve's input checks and statistics on the host",
        ),
        (
            "fwd+bwd, checkpoint adjoint, solve's defaults",
            "grad solve",
            "grad scan",
            f"solve sizes max_steps and checkpoints to the step count: {STEPS} + 1",
        ),
        (
            "fwd+bwd, max_steps 4096",
            "grad solve cap 4096",
            "grad scan",
            "diffrax's default checkpoint count for a 4096-step cap (the default before)",
        ),
    ]
    for label, name, ref, how in specs:
        if name not in times:
            continue
        ratio = pair_ratio(times, name, ref)
        goal = name in ("fwd solve (jit)", "grad solve")
        met = bool(ratio["median"] <= GOAL) if goal else None
        note = how
        if met is False:
            note += (
                f"; {spread(times[name])['median'] * 1e3:.1f} ms against "
                f"{spread(times[ref])['median'] * 1e3:.1f} ms"
            )
            if ratio["min"] <= GOAL:
                note += "; the per-round ratios straddle the goal (min-max)"
        rows.append(
            row(
                FAMILY,
                label,
                value=ratio["median"],
                unit="x",
                reference=f"lax.scan {shape}",
                spread_=ratio,
                goal=f"<= {GOAL}" if goal else "reported",
                met=met,
                note=note,
                seconds=spread(times[name]),
                reference_seconds=spread(times[ref]),
            )
        )
    rows[0]["max_abs_diff_vs_scan"] = diff
    rows[2]["grad_max_rel_diff_vs_scan"] = g_diff
    return rows
