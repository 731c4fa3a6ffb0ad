"""Work against precision: error of the end state against NFE and wall time.

Two references are computed in the same call and every run is compared with both: a
float64 ODE solution at a tight tolerance (the exact flow), and the paper's Euler map
(`dt0 = 0.1`, in the model's own dtype), which the paper's weights were trained through.
"""

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float
from matplotlib.figure import Figure

from et_ode import solvers as _solvers
from et_ode.vocab import Flow

from ._common import as_batch, cast, float64_available, shard
from ._plotting import (
    caption,
    figure,
    finish,
    label_points,
    positive,
    renderer_of,
    samples_text,
    solver_text,
    tidy_log_axes,
    title,
)
from ._records import metadata, model_dtype


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
    atol_factor: float = 1e-2,
    reference_solver: str = "dopri8",
    reference_rtol: float = 1e-12,
    repeats: int = 3,
    max_steps: int = 100_000,
    args_batched: bool = False,
) -> dict[str, Any]:
    """Error of `x(t1)` against NFE and wall time for a grid of tolerances (adaptive
    solvers, `atol = atol_factor * rtol`) and constant step sizes (any explicit solver).

    **Arguments:**

    - `model`, `x0` (`[N, D]` or `[B, N, D]`), `args`: as in `solvers.solve`.
      **Protocol:** any `solvers.EnergySystem` (`energy`, `vector_field`, `residual`);
      `error_paper` compares with the ET paper's Euler map (dt 0.1), meaningful for the
      ET only.
    - `solvers` (adaptive, PID steps) x `tolerances`; `fixed_solvers` (constant steps)
      x `step_sizes`.
    - `t1`, `flow`, `max_steps`: every solve (the paper's horizon 1.2 by default).
    - `reference_solver`, `reference_rtol`: the exact reference, solved in float64 (a
      float32 model is cast) with `atol = reference_rtol * 1e-2`.
    - `repeats`: timed calls after a warm-up (the median is reported; never compare
      timings taken on different machines).

    **Returns:** a dict: `runs`, a list with per run `solver`, `kind` (`"adaptive"` or
    `"fixed"`), `rtol`/`atol` or `dt0`, `nfe` (`stats["nfe"]`: the tableau's
    count, exact for constant steps, a lower bound for first-same-as-last solvers under
    adaptive steps; see `solvers.solve`), `num_steps`, `wall_s` (median seconds per solve, solve
    overhead
    included), `error_exact` (relative max error against the float64 reference),
    `error_paper` (against the paper's Euler map); `reference` (`x_final`,
    solver, tolerances, NFE, dtype); `paper` (`x_final`, `error_exact`: how far the
    paper's map is from the exact flow); and `metadata`.
    """
    xb, _ = as_batch(x0)
    dtype = model_dtype(model)
    ref_model, ref_x, ref_args = cast((model, xb, args), jnp.float64)
    xb, args, batch = shard(xb, args, args_batched)
    ref_x, ref_args, _ = shard(ref_x, ref_args, args_batched)
    ref = _solvers.solve(
        ref_model,
        ref_x,
        args=ref_args,
        t1=t1,
        flow=flow,
        solver=reference_solver,
        rtol=reference_rtol,
        atol=reference_rtol * 1e-2,
        max_steps=max_steps,
        args_batched=args_batched,
    )
    x_exact = np.asarray(ref.x_final, np.float64)[:batch]
    paper = _solvers.solve(
        model,
        xb,
        args=args,
        t1=t1,
        flow=flow,
        solver="euler",
        dt0=0.1,
        max_steps=max_steps,
        args_batched=args_batched,
    )
    x_paper = np.asarray(paper.x_final, np.float64)[:batch]
    runs = []
    grid = [
        ("adaptive", s, dict(rtol=tol, atol=atol_factor * tol))
        for s in solvers
        for tol in tolerances
    ]
    grid += [("fixed", s, dict(dt0=dt)) for s in fixed_solvers for dt in step_sizes]
    for kind, name, options in grid:

        def run(name=name, options=options):
            return _solvers.solve(
                model,
                xb,
                args=args,
                t1=t1,
                flow=flow,
                solver=name,
                max_steps=max_steps,
                args_batched=args_batched,
                throw=False,
                **options,
            )

        sol, wall = timed(run, repeats)
        reasons = list(np.atleast_1d(sol.stats["stop_reason"]))[:batch]
        ok = all(r == "t1" for r in reasons)
        x_final = np.asarray(sol.x_final)[:batch]
        runs.append(
            dict(
                solver=name,
                kind=kind,
                **options,
                nfe=int(np.max(np.asarray(sol.stats["nfe"])[:batch])),
                num_steps=int(np.max(np.asarray(sol.stats["num_steps"])[:batch])),
                wall_s=wall,
                ok=ok,
                stop_reason=reasons,
                error_exact=relative_error(x_final, x_exact) if ok else float("nan"),
                error_paper=relative_error(x_final, x_paper) if ok else float("nan"),
            )
        )
    return dict(
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


def plot_work_precision(
    result: dict, path: Path | str | None = None, against: str = "exact"
) -> Figure:
    """Error (against the float64 reference, or `against="paper"`: the paper's Euler
    map) versus NFE (left) and versus wall time (right), one line per solver and kind,
    log-log, each point labelled with its tolerance (`rtol`; `atol` is `atol_factor`
    times it) or its constant step (`dt`). The title says what is compared; the caption
    gives the model, sample count, flow, t1, dtype and the reference. Runs that did not
    reach t1 are left out and counted in the caption. Returns the `Figure`."""
    fig, axes = figure(2, 1, width=4.0, height=3.4)
    key = "error_exact" if against == "exact" else "error_paper"
    meta = result.get("metadata", {})
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in result["runs"]:
        groups.setdefault((run["solver"], run["kind"]), []).append(run)
    colours: dict[str, str] = {}
    for (name, kind), runs in groups.items():
        style = "-o" if kind == "adaptive" else "--s"
        label = f"{name}, {'tolerances' if kind == 'adaptive' else 'constant steps'}"
        colour = colours.setdefault(name, f"C{len(colours)}")
        for ax, x_key in zip(axes[0], ("nfe", "wall_s")):
            ax.plot(
                [r[x_key] for r in runs],
                positive([r[key] for r in runs]),
                style,
                ms=4,
                color=colour,
                label=label if ax is axes[0, 0] else None,
            )
    versus = (
        "the float64 reference (exact flow)"
        if against == "exact"
        else "the paper's Euler map (dt 0.1)"
    )
    for ax, xlabel in zip(
        axes[0], ("function evaluations per solve (NFE)", "wall time per solve (s)")
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("relative max error of x(t1)")
    if against == "exact":
        paper = result["paper"]["error_exact"]
        if np.isfinite(paper) and paper > 0:
            for ax in axes[0]:
                ax.axhline(
                    paper,
                    color="0.5",
                    ls=":",
                    label="paper's Euler map (dt 0.1)" if ax is axes[0, 0] else None,
                )
    fig.legend(loc="outside lower center", ncols=3, fontsize=8)
    failed = sum(1 for run in result["runs"] if not np.isfinite(run[key]))
    reference = result.get("reference", {})
    extra = [
        f"adaptive: atol = {meta['atol_factor']:g} rtol" if "atol_factor" in meta else "",
        f"reference {solver_text(reference)} in {reference.get('dtype', 'float64')}"
        if against == "exact" and reference.get("solver")
        else "",
        f"{failed} runs did not reach t1 (not shown)" if failed else "",
    ]
    batch = meta.get("batch") or np.shape(reference.get("x_final", np.zeros((0,))))[0] or None
    what = (
        f"Work against precision: error of x(t1) against {versus}; points labelled with rtol or dt"
    )

    def label_every_point():
        tidy_log_axes(fig)
        renderer, left_out = renderer_of(fig), 0  # one drawing fixes the layout
        for ax, x_key in zip(axes[0], ("nfe", "wall_s")):
            for (name, kind), runs in groups.items():
                labels = [
                    f"{r['rtol']:.0e}".replace("e-0", "e-")
                    if kind == "adaptive"
                    else f"dt {r['dt0']:g}"
                    for r in runs
                ]
                left_out += label_points(
                    ax,
                    [r[x_key] for r in runs],
                    positive([r[key] for r in runs]),
                    labels,
                    color=colours[name],
                    renderer=renderer,
                )
        return left_out

    for ax in axes[0]:
        ax.margins(x=0.08, y=0.1)  # room for the labels of the outermost points
    title(
        fig,
        what,
        caption(meta, samples=samples_text(meta, batch) if batch else None, solver="", extra=extra),
    )
    if label_every_point():  # say so, and place the labels again under the longer caption
        for ax in axes[0]:
            for text in list(ax.texts):
                text.remove()
        extra.append("points without a label had no room for one (the JSON lists every run)")
        title(
            fig,
            what,
            caption(
                meta, samples=samples_text(meta, batch) if batch else None, solver="", extra=extra
            ),
        )
        label_every_point()
    return finish(fig, path)
