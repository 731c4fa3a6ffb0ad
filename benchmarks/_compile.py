"""Row 5, compilation: the time of the first call of `solvers.solve` in a configuration and
shape that nothing in the process has compiled yet (tsit5, projected flow, a fixed-point
stop, the batch less one sample) against a warm call, and the number of compilations over
repeated calls with new data and new tolerances passed as Python floats, the way users
write them (`solve` turns them into arrays). Compilations are counted with JAX's own
instrumentation: `jax.monitoring` duration events
`/jax/core/compile/backend_compile_duration` (an XLA compilation) and
`/jax/core/compile/jaxpr_trace_duration` (a trace)."""

import contextlib
import time

import jax
from jax import monitoring

from et_ode import solvers

from ._common import row, spread

FAMILY = "compile"
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
TRACE = "/jax/core/compile/jaxpr_trace_duration"
# An executable read from JAX's persistent compilation cache (where a user configured
# one) instead of compiled: counted as a compilation, since either way the call needed
# an executable that the process did not hold.
CACHE_READ = "/jax/compilation_cache/cache_retrieval_time_sec"


class CompileCounter:
    """Counts XLA compilations (or persistent-cache reads) and traces, and their
    seconds, while active."""

    def __init__(self):
        self.active = False
        self.events = {BACKEND_COMPILE: [], TRACE: []}

    def _listener(self, event, duration, **kwargs):
        event = BACKEND_COMPILE if event == CACHE_READ else event
        if self.active and event in self.events:
            self.events[event].append((duration, kwargs.get("fun_name")))

    def __enter__(self):
        monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc):
        monitoring.unregister_event_duration_listener(self._listener)

    @contextlib.contextmanager
    def counting(self):
        before = {k: len(v) for k, v in self.events.items()}
        self.active = True
        result = {}
        try:
            yield result
        finally:
            self.active = False
            for k, v in self.events.items():
                new = v[before[k] :]
                result[k] = {
                    "count": len(new),
                    "seconds": sum(d for d, _ in new),
                    "functions": sorted({str(f) for _, f in new}),
                }


def _calls(quick: bool):
    """Solve options per repeated call: new tolerances each time, as Python floats."""
    n = 3 if quick else 6
    for i in range(n):
        yield dict(
            solver="tsit5",
            rtol=1e-3 * (1 + i),
            atol=1e-5 * (1 + 2 * i),
            flow="projected",
            stop=solvers.FixedPointStop(atol=0.05 * (1 + i)),
            t1=20.0 + i,
            max_steps=500,
            throw=False,
        )


def run(problem, opts) -> list[dict]:
    model = problem.core
    # a shape no other row compiles (caches are not cleared: that would slow every later
    # jitted function in the process)
    x0 = problem.x0[: max(problem.batch - 1, 1)]
    calls = list(_calls(opts.quick))
    with CompileCounter() as counter:
        with counter.counting() as first:
            start = time.perf_counter()
            jax.block_until_ready(solvers.solve(model, x0, **calls[0]).x_final)
            first_s = time.perf_counter() - start
        # new data for every call, made before counting (making it compiles too)
        data = [
            jax.block_until_ready(
                x0 + 0.01 * i * jax.random.normal(jax.random.key(i), x0.shape, x0.dtype)
            )
            for i in range(1, len(calls))
        ]
        warm = []
        with counter.counting() as repeated:
            for x, options in zip(data, calls[1:]):
                start = time.perf_counter()
                jax.block_until_ready(solvers.solve(model, x, **options).x_final)
                warm.append(time.perf_counter() - start)
    n_compiles = repeated[BACKEND_COMPILE]["count"]
    n_traces = repeated[TRACE]["count"]
    warm_s = spread(warm)
    return [
        row(
            FAMILY,
            "first call / warm call (tsit5, projected, FixedPointStop)",
            value=first_s / warm_s["median"],
            unit="x",
            reference="warm call, same shapes",
            goal="reported",
            met=None,
            note=(
                f"first call {first_s:.2f} s ({first[BACKEND_COMPILE]['count']} XLA "
                f"compilations, {first[BACKEND_COMPILE]['seconds']:.2f} s of them; "
                f"{first[TRACE]['count']} traces), warm call "
                f"{warm_s['median'] * 1e3:.1f} ms"
            ),
            first_call_seconds=first_s,
            warm_call_seconds=warm_s,
            first_call_compilations=first[BACKEND_COMPILE]["count"],
            first_call_compile_seconds=first[BACKEND_COMPILE]["seconds"],
            first_call_traces=first[TRACE]["count"],
        ),
        row(
            FAMILY,
            f"recompilations over {len(calls) - 1} calls with new data and tolerances",
            value=n_compiles,
            unit="compilations",
            reference="Python-float rtol, atol, FixedPointStop(atol), t1 changed every call",
            goal="0",
            met=n_compiles == 0,
            note=(f"{n_traces} retraces" if n_traces else "no retraces")
            + (
                ""
                if n_compiles == 0
                else f"; recompiled: {', '.join(repeated[BACKEND_COMPILE]['functions'])}"
            ),
            recompilations=n_compiles,
            retraces=n_traces,
            recompiled_functions=repeated[BACKEND_COMPILE]["functions"],
        ),
    ]
