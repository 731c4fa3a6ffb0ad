"""Running the rows, the command line, and the record written to disk."""

import argparse
import dataclasses
import os
import sys
import time
import traceback
from pathlib import Path

ROWS = (
    "overhead",
    "flops",
    "closed_form",
    "fixed_point",
    "memory",
    "compile",
    "batch",
    "devices",
    "sparse",
    "imagenet",
    "solver_objects",
    "sweep",
    "training_step",
    "long_horizon",
    "landscape",
    "noisy",
)
# The rows that take hours at full size on a CPU: without a GPU (and without
# `--size full`) they run at their quick sizes, and their rows say so.
SMALL_WITHOUT_GPU = {
    "landscape": "a 64 x 64 basin grid, 100 continuation points and T = 100 take hours on a CPU",
    "long_horizon": "tsit5's projected solve to t = 1e4 takes 5-15 minutes on a CPU",
}
SIZES = ("auto", "full")


def _module(family: str):
    from . import (
        _batch,
        _closed_form,
        _compile,
        _devices,
        _distributed,
        _fixed_point,
        _flops,
        _imagenet,
        _landscape,
        _long_horizon,
        _memory,
        _noisy,
        _overhead,
        _solver_objects,
        _sparse,
        _sweep,
        _training_step,
    )

    return {
        "overhead": _overhead,
        "flops": _flops,
        "closed_form": _closed_form,
        "fixed_point": _fixed_point,
        "memory": _memory,
        "compile": _compile,
        "batch": _batch,
        "devices": _devices,
        "distributed": _distributed,
        "sparse": _sparse,
        "imagenet": _imagenet,
        "solver_objects": _solver_objects,
        "sweep": _sweep,
        "training_step": _training_step,
        "long_horizon": _long_horizon,
        "landscape": _landscape,
        "noisy": _noisy,
    }[family]


def run_benchmarks(
    rows=ROWS,
    *,
    quick: bool = False,
    batch: int = 32,
    repeats: int | None = None,
    model: str = "paper",
    tiny: bool = False,
    problem=None,
    size: str = "auto",
    print_fn=print,
) -> dict:
    """Run the named rows and return the record (machine, problem, options, rows).

    `tiny=True` uses a tiny random image model instead of the shipped one (for tests).
    `size="auto"` runs the rows of `SMALL_WITHOUT_GPU` at their quick sizes when JAX has
    no GPU; `size="full"` runs every row at full size. Every row records the size it
    ran (`size`: "full" or "quick", with `size_why` where auto chose quick).
    A row that raises is recorded with `error: True` and its message; the others run.
    """
    from . import _common, _records

    unknown = [r for r in rows if r not in ROWS + ("distributed",)]
    if unknown:
        raise ValueError(f"unknown row(s) {unknown}; rows: {', '.join(ROWS)}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)} (got {size!r})")
    if repeats is None:
        repeats = 3 if quick else 5
    opts = _common.Options(quick=quick, repeats=repeats, tiny=tiny)
    started, cpu_started = time.perf_counter(), time.process_time()
    if problem is None:
        problem = _common.tiny_problem(batch) if tiny else _common.shipped_problem(model, batch)
    record = _records.skeleton(
        "et-ode",
        _common.machine(),
        problem.describe(),
        {
            "rows": list(rows),
            "quick": quick,
            "batch": batch,
            "repeats": repeats,
            "model": "tiny" if tiny else Path(str(model)).name,
            "size": size,
        },
    )
    record |= {
        "conventions": {
            "timing": "wall-clock seconds with jax.block_until_ready, after a warm-up "
            "call; median of the repeats; timed in alternation with the "
            "reference; ratio spreads are over per-round ratios",
            "flops": "2 FLOPs per multiply-add; matrix products only, counted from the "
            "shapes (see benchmarks/_flops.py); XLA's cost_analysis beside it",
            "memory": "XLA memory_analysis of the compiled program (temp + argument + "
            "output bytes), at compile time, CPU and GPU alike",
        },
        "row_seconds": {},
    }
    print_fn(
        f"machine: {record['machine']['cpu']}, {record['machine']['cpu_cores']} cores, "
        f"JAX {record['machine']['versions']['jax']} on {record['machine']['jax_backend']} "
        f"({record['machine']['device_kind']} x {record['machine']['devices']})"
    )
    p = record["problem"]
    print_fn(
        f"problem: {p['model']}: D = {p['dim']}, {p['heads']} heads of {p['head_dim']}, "
        f"{p['memories']} memories, batch {p['batch']}, N = {p['tokens']} tokens, "
        f"{p['dtype']}"
    )
    small = size == "auto" and record["machine"]["jax_backend"] == "cpu"
    for family in rows:
        start = time.perf_counter()
        row_opts, why = opts, ""
        if small and not quick and family in SMALL_WITHOUT_GPU:
            row_opts, why = dataclasses.replace(opts, quick=True), SMALL_WITHOUT_GPU[family]
        try:
            new = _module(family).run(problem, row_opts)
        except Exception as error:  # record it, go on with the other rows
            traceback.print_exc(file=sys.stderr)
            new = [
                _common.row(
                    family,
                    "error",
                    met=False,
                    error=True,
                    note=f"{type(error).__name__}: {error}"[:500],
                )
            ]
        seconds = time.perf_counter() - start
        for r in new:
            r["size"] = "quick" if row_opts.quick else "full"
            if why:
                r["size_why"] = f"no GPU: {why} (`--size full` runs them)"
        record["rows"].extend(new)
        record["row_seconds"][family] = seconds
        print_fn(f"  {family}: {len(new)} rows in {seconds:.1f} s", flush=True)
    from ._report import summary

    record["summary"] = summary(record["rows"])
    record["seconds"] = time.perf_counter() - started
    record["cpu_seconds"] = time.process_time() - cpu_started  # this process's CPU time
    try:
        record["load_average"] = list(os.getloadavg())
    except OSError:
        pass
    return record


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="et-ode benchmarks: speed, memory and scale as ratios measured in one "
        "run. Prints a Markdown table and writes JSON.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer repeats, batch sizes and steps (smoke runs, tests)",
    )
    parser.add_argument(
        "--rows",
        default=",".join(ROWS),
        help=f"comma-separated rows (default all: {','.join(ROWS)})",
    )
    parser.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    parser.add_argument(
        "--size",
        choices=SIZES,
        default="auto",
        help="auto (default): full sizes, except that without a GPU the rows "
        f"{', '.join(SMALL_WITHOUT_GPU)} run at their quick sizes (so that `make bench` "
        "finishes on a 2-core CPU); full: every row at full size",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed rounds per measurement (default 5, --quick 3; fewer "
        "where a row's time budget runs out, never below 3)",
    )
    parser.add_argument(
        "--model", default="paper", help="shipped model name or checkpoint path (default paper)"
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a tiny random model instead (tests the code, not the machine)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="JSON path (default benchmarks/records/<UTC time>-<commit>.json, the "
        "committed records the benchmarks page renders; with --quick or --tiny "
        "runs/bench/bench-<time>.json)",
    )
    dist = parser.add_argument_group(
        "several processes",
        "run the 'distributed' row over the devices of several "
        "processes (hosts); start the same command in every process",
    )
    dist.add_argument(
        "--distributed",
        action="store_true",
        help="call jax.distributed.initialize() first; without the options "
        "below JAX reads the cluster's environment (SLURM, Open MPI, "
        "or JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID)",
    )
    dist.add_argument("--coordinator", default=None, help="host:port of process 0")
    dist.add_argument("--num-processes", type=int, default=None)
    dist.add_argument("--process-id", type=int, default=None)
    args = parser.parse_args(argv)
    args.rows = tuple(r.strip() for r in args.rows.split(",") if r.strip())
    if args.coordinator or args.num_processes is not None or args.process_id is not None:
        args.distributed = True
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    rows = args.rows
    if args.distributed:
        from . import _distributed

        _distributed.initialize(args.coordinator, args.num_processes, args.process_id)
        rows = ("distributed",)
        if args.rows != ROWS and args.rows != rows:
            print(
                "--distributed runs the 'distributed' row only; the other rows measure "
                "one process: run them without --distributed.",
                file=sys.stderr,
            )
    import jax

    from et_ode.analysis import save_json

    from ._report import table

    lead = jax.process_index() == 0
    record = run_benchmarks(
        rows,
        quick=args.quick,
        batch=args.batch,
        repeats=args.repeats,
        model=args.model,
        tiny=args.tiny,
        size=args.size,
        print_fn=print if lead else (lambda *a, **k: None),
    )
    if lead:
        print()
        print(table(record["rows"]))
        s = record["summary"]
        print(
            f"\ngoals met: {s['met']} of {s['goals']}"
            + (f"; not met: {'; '.join(s['not_met'])}" if s["not_met"] else "")
        )
        from ._records import default_path

        path = Path(args.out) if args.out else default_path(record, args.quick or args.tiny)
        save_json(path, record, indent=2)
        print(f"total {record['seconds']:.0f} s; wrote {path}")
    if args.distributed:
        jax.distributed.shutdown()
    return 1 if record["summary"]["errors"] else 0
