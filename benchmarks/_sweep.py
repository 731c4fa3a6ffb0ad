"""Row: a horizon sweep, 8 end times `t1` in one `jax.jit(jax.vmap(...))` program
against 8 separate solves (tsit5, PID control, one state). Reported: the wall-time ratio
(warm, timed in alternation), the compilations each needed from a cold start in this
shape (counted as `benchmarks/_compile.py` does), and that both give the same end
states. The vmapped program runs every horizon in lockstep until the longest ends, so
its work is about 8 times the longest solve's; the separate solves pay Python and
dispatch overhead per call instead. Model and state are arguments of the jitted
function, not constants closed over (in float32, XLA would fold them and the rounding
would differ from the separate solves)."""

import time

import jax
import jax.numpy as jnp
import numpy as np

from et_ode import solvers

from ._common import block, pair_ratio, row, spread, time_interleaved
from ._compile import BACKEND_COMPILE, TRACE, CompileCounter

FAMILY = "sweep"
RTOL, ATOL = 1e-4, 1e-6


def _end(model, x0, t1):
    return solvers.solve(
        model, x0, solver="tsit5", rtol=RTOL, atol=ATOL, t1=t1, max_steps=4096
    ).x_final


_sweep = jax.jit(jax.vmap(_end, in_axes=(None, None, 0)))


def horizons(quick: bool) -> np.ndarray:
    return np.geomspace(0.5, 4.0 if quick else 12.0, 8)


def run(problem, opts) -> list[dict]:
    model = problem.core
    # one state of a shape ([N, D], unbatched) that no other row compiles
    x0 = problem.x0[0] + 0.0
    ts = horizons(opts.quick)
    ts_array = jnp.asarray(ts, x0.dtype)

    def separate():
        return [_end(model, x0, float(t)) for t in ts]

    with CompileCounter() as counter:
        with counter.counting() as c_sweep:
            start = time.perf_counter()
            swept = block(_sweep(model, x0, ts_array))
            sweep_first = time.perf_counter() - start
        with counter.counting() as c_separate:
            start = time.perf_counter()
            each = block(separate())
            separate_first = time.perf_counter() - start
    each = np.stack([np.asarray(e) for e in each])
    diff = float(np.max(np.abs(np.asarray(swept) - each)))
    relative = diff / float(np.max(np.abs(each)))
    times = time_interleaved(
        {"sweep": lambda: _sweep(model, x0, ts_array), "separate": separate},
        opts.reps(3 if opts.quick else 7),
        budget=30.0,
    )
    ratio = pair_ratio(times, "sweep", "separate")
    n_sweep, n_separate = c_sweep[BACKEND_COMPILE]["count"], c_separate[BACKEND_COMPILE]["count"]
    sep = spread(times["separate"])["median"]
    return [
        row(
            FAMILY,
            f"8 horizons in one vmapped jit / 8 separate solves (t1 {ts[0]:g}..{ts[-1]:g})",
            value=spread(times["sweep"])["median"] / sep,
            unit="x",
            reference="8 calls of solvers.solve, Python-float t1 each, warm",
            spread_=ratio,
            goal="reported; one compilation for the sweep",
            met=n_sweep == 1,
            note=(
                f"separate {sep * 1e3:.1f} ms; compilations from cold: sweep {n_sweep}, "
                f"separate {n_separate}; first calls {sweep_first:.2f} s and "
                f"{separate_first:.2f} s; max |diff| {diff:.1e} ({relative:.1e} of max |x|; "
                f"rtol {RTOL})"
            ),
            horizons=ts,
            compilations={"sweep": n_sweep, "separate": n_separate},
            traces={"sweep": c_sweep[TRACE]["count"], "separate": c_separate[TRACE]["count"]},
            first_call_seconds={"sweep": sweep_first, "separate": separate_first},
            max_abs_diff=diff,
            max_rel_diff=relative,
            dtype=str(x0.dtype),
            seconds={"sweep": spread(times["sweep"]), "separate": spread(times["separate"])},
        )
    ]
