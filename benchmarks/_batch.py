"""Row 6, batch scaling: throughput (samples per second) of the paper's solve (Euler dt
0.1, 12 steps, native flow, inside `jax.jit`) against the batch size, as a ratio to the
throughput at batch 1 measured in the same run."""

from ._common import paper_solve, row, spread, time_interleaved

FAMILY = "batch"


def sizes(quick: bool) -> list[int]:
    return [1, 2, 4] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256]


def run(problem, opts) -> list[dict]:
    model = problem.core
    solve = paper_solve
    batches = sizes(opts.quick)
    xs = {b: problem.tokens(b) for b in batches}
    repeats = opts.reps(2 if opts.quick else 5)
    times = time_interleaved(
        {b: (lambda b=b: solve(model, xs[b])) for b in batches}, repeats, budget=20.0
    )
    base = batches[0] / spread(times[batches[0]])["median"]
    rows = []
    for b in batches:
        t = spread(times[b])
        rate = b / t["median"]
        rows.append(
            row(
                FAMILY,
                f"euler-12 solve, batch {b}",
                value=rate / base,
                unit="x",
                reference=f"batch 1: {base:.1f} samples/s",
                goal="reported",
                met=None,
                note=f"{rate:.1f} samples/s",
                samples_per_second=rate,
                batch=b,
                seconds=t,
            )
        )
    return rows
