"""Row: a diffrax solver object against its name. `solvers.solve(solver=diffrax.Tsit5())`
and `solver="tsit5"` should build the same program: the same end state (bit for bit on
one machine), the same steps, the same time (ratio of medians, timed in alternation).
Pairs: tsit5 with PID step control on the problem's batch, and kvaerno5 on a small
slice of it (one sample, 8 tokens, t1 1.2; quick: 0.3): diffrax's Newton iteration
builds a dense Jacobian, `N D` JVPs per step, too costly at the full size (83 steps,
12.6 s per solve on the shipped core's 8-token slice to t1 1.2 on a 2-core CPU)."""

import diffrax
import equinox as eqx
import numpy as np

from et_ode import solvers

from ._common import block, pair_ratio, row, spread, time_interleaved

FAMILY = "solver_objects"
RTOL, ATOL = 1e-4, 1e-6


@eqx.filter_jit
def _solve(model, x0, solver, t1):
    sol = solvers.solve(model, x0, solver=solver, rtol=RTOL, atol=ATOL, t1=t1, max_steps=4096)
    return sol.x_final, sol.stats["num_steps"]


def _pairs(problem, opts):
    x = problem.tokens(min(problem.batch, 4 if opts.quick else problem.batch))
    small = problem.x0[:1, :8]
    t1 = 1.2 if opts.quick else 12.0
    pairs = [("tsit5", diffrax.Tsit5(), x, t1)]
    if not opts.tiny:  # tests: the explicit pair only (kvaerno5's compile is the slow part)
        pairs.append(("kvaerno5", diffrax.Kvaerno5(), small, 0.3 if opts.quick else 1.2))
    return pairs


def run(problem, opts) -> list[dict]:
    model = problem.core
    rows = []
    for name, obj, x, t1 in _pairs(problem, opts):
        fns = {
            "name": lambda x=x, name=name, t1=t1: _solve(model, x, name, t1),
            "object": lambda x=x, obj=obj, t1=t1: _solve(model, x, obj, t1),
        }
        by_name, by_object = block(fns["name"]()), block(fns["object"]())
        times = time_interleaved(fns, opts.reps(3 if opts.quick else 7), budget=30.0)
        ratio = pair_ratio(times, "object", "name")
        diff = float(np.max(np.abs(np.asarray(by_name[0]) - np.asarray(by_object[0]))))
        same_steps = bool(np.array_equal(np.asarray(by_name[1]), np.asarray(by_object[1])))
        name_s = spread(times["name"])["median"]
        rows.append(
            row(
                FAMILY,
                f"{name}: diffrax.{type(obj).__name__}() / solver={name!r}",
                value=spread(times["object"])["median"] / name_s,
                unit="x",
                reference=f"solver={name!r}, same rtol {RTOL}, atol {ATOL}, t1 {t1}",
                spread_=ratio,
                goal="1 (same program), same numbers",
                met=diff == 0.0 and same_steps,
                note=(
                    f"{name_s * 1e3:.1f} ms by name; max |diff| {diff:.1e}, steps "
                    f"{np.asarray(by_name[1]).tolist()} by name"
                    f"{'' if same_steps else ' vs ' + str(np.asarray(by_object[1]).tolist())}"
                ),
                max_abs_diff=diff,
                same_steps=same_steps,
                shape=list(x.shape),
                t1=t1,
                seconds={"name": spread(times["name"]), "object": spread(times["object"])},
            )
        )
    return rows
