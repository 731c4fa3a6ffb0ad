"""Work against precision: error of the end state against NFE and wall time.

Two references are computed in the same call and every run is compared with both: a
float64 ODE solution at a tight tolerance (the exact flow), and the paper's Euler map
(`dt0 = 0.1`, in the model's own dtype), which the paper's weights were trained through.
"""

import statistics
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from et_ode import solvers as _solvers
from et_ode.vocab import Flow

from .._common import as_batch, cast, float64_available, shard
from .._records import metadata, model_dtype
from ._settings import WorkPrecisionSettings
from ._solver_run_records import WorkPrecision, WorkPrecisionRun


def relative_error(x: Float[ArrayLike, "*shape"], reference: Float[ArrayLike, "*shape"]) -> float:
    """`max |x - reference| / max |reference|` over every entry (a batch included)."""
    x, reference = np.asarray(x, np.float64), np.asarray(reference, np.float64)
    return float(np.max(np.abs(x - reference)) / np.max(np.abs(reference)))


def timed(fn, repeats: int = 3):
    """`(result, median seconds)`: one warm-up call (compilation), then the median of
    `repeats` calls, each waited on with `jax.block_until_ready`."""
    result = fn()
    jax.block_until_ready(result.x_final)
    times = []
    for _ in range(max(1, int(repeats))):
        start = time.perf_counter()
        result = fn()
        jax.block_until_ready(result.x_final)
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


def work_precision(
    model: _solvers.EnergySystem,
    x0: Float[ArrayLike, "*batch N D"],
    args: Any = None,
    *,
    solvers: Sequence[str] = ("bosh3", "tsit5", "dopri8"),
    tolerances: Sequence[float] = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8),
    fixed_solvers: Sequence[str] = ("euler", "heun", "tsit5"),
    step_sizes: Sequence[float] = (0.2, 0.1, 0.05, 0.025, 0.0125),
    t1: float = 1.2,
    flow: Flow = "native",
    settings: WorkPrecisionSettings = WorkPrecisionSettings(),
) -> WorkPrecision:
    """Error of `x(t1)` against NFE and wall time for a grid of tolerances (adaptive
    solvers, `atol = settings.atol_factor * rtol`) and constant step sizes (any explicit
    solver).

    **Arguments:**

    - `model`, `x0` (`[N, D]` or `[B, N, D]`), `args`: as in `solvers.solve` (per
      sample with `settings.args_batched`).
      **Protocol:** any `solvers.EnergySystem` (`energy`, `vector_field`, `residual`);
      `error_paper` compares with the ET paper's Euler map (dt 0.1), meaningful for the
      ET only.
    - `solvers` (adaptive, PID steps) x `tolerances`; `fixed_solvers` (constant steps)
      x `step_sizes`: the grid, each run a `solvers.SolveOptions` of its solver and
      steps on `flow`.
    - `t1`, `flow`: every solve (the paper's horizon 1.2 by default).
    - `settings`: a `WorkPrecisionSettings`: `atol_factor`, the exact reference
      (`reference_solver`, `reference_rtol`: solved in float64, a float32 model cast,
      with `atol = reference_rtol * 1e-2`), `repeats` (timed calls after a warm-up: the
      median is reported; never compare timings taken on different machines),
      `max_steps` (every solve) and `args_batched`.

    **Returns:** a `WorkPrecision`: per run a `WorkPrecisionRun` (its solver and
    tolerance or step, NFE, steps, wall time and both errors; each entry documented on
    its field), the `reference` and `paper` solutions, and `metadata`.
    """
    atol_factor, repeats, max_steps = settings.atol_factor, settings.repeats, settings.max_steps
    reference_solver, reference_rtol = settings.reference_solver, settings.reference_rtol
    args_batched = settings.args_batched
    xb, _ = as_batch(x0)
    dtype = model_dtype(model)
    ref_model, ref_x, ref_args = cast((model, xb, args), jnp.float64)
    xb, args, batch = shard(xb, args, args_batched)
    ref_x, ref_args, _ = shard(ref_x, ref_args, args_batched)
    reference = _solvers.SolveOptions(
        solver=reference_solver,
        rtol=reference_rtol,
        atol=reference_rtol * 1e-2,
        max_steps=max_steps,
        flow=flow,
    )
    ref = _solvers.solve(
        ref_model, ref_x, options=reference, args=ref_args, t1=t1, args_batched=args_batched
    )
    x_exact = np.asarray(ref.x_final, np.float64)[:batch]
    paper_map = _solvers.SolveOptions(solver="euler", dt0=0.1, max_steps=max_steps, flow=flow)
    paper = _solvers.solve(
        model, xb, options=paper_map, args=args, t1=t1, args_batched=args_batched
    )
    x_paper = np.asarray(paper.x_final, np.float64)[:batch]
    runs = []
    grid = [
        ("adaptive", s, dict(rtol=float(tol), atol=float(atol_factor * tol)))
        for s in solvers
        for tol in tolerances
    ]
    grid += [("fixed", s, dict(dt0=float(dt))) for s in fixed_solvers for dt in step_sizes]
    for kind, name, steps in grid:
        options = _solvers.SolveOptions(solver=name, max_steps=max_steps, flow=flow).replace(
            **steps
        )

        def run(options=options):
            return _solvers.solve(
                model, xb, options=options, args=args, t1=t1, args_batched=args_batched, throw=False
            )

        sol, wall = timed(run, repeats)
        reasons = list(np.atleast_1d(sol.stats["stop_reason"]))[:batch]
        ok = all(r == "t1" for r in reasons)
        x_final = np.asarray(sol.x_final)[:batch]
        runs.append(
            WorkPrecisionRun(
                solver=name,
                kind=kind,
                **steps,
                nfe=int(np.max(np.asarray(sol.stats["nfe"])[:batch])),
                num_steps=int(np.max(np.asarray(sol.stats["num_steps"])[:batch])),
                wall_s=wall,
                ok=ok,
                stop_reason=reasons,
                error_exact=relative_error(x_final, x_exact) if ok else float("nan"),
                error_paper=relative_error(x_final, x_paper) if ok else float("nan"),
            )
        )
    return WorkPrecision(
        runs=runs,
        reference=dict(
            x_final=x_exact,
            solver=reference_solver,
            rtol=reference_rtol,
            atol=reference_rtol * 1e-2,
            nfe=np.asarray(ref.stats["nfe"]),
            dtype=str(ref.x_final.dtype),
        ),
        paper=dict(
            x_final=x_paper, solver="euler", dt0=0.1, error_exact=relative_error(x_paper, x_exact)
        ),
        metadata=metadata(
            study="work_precision",
            dtype=dtype,
            flow=flow,
            t1=t1,
            atol_factor=atol_factor,
            batch=int(batch),
            repeats=repeats,
            max_steps=max_steps,
            float64_reference=float64_available(),
            error="max |x(t1) - x_ref(t1)| / max |x_ref(t1)| over all entries",
            timing="median wall seconds of `repeats` solves after a warm-up call, "
            "block_until_ready, solve's Python overhead included",
        ),
    )
