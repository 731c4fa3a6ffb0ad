"""The work-precision figure (`plot_work_precision`): error against NFE and wall time
per solver and tolerance, from `work_precision`'s result (a `WorkPrecision`, or a dict
with its keys)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

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


def plot_work_precision(
    result: Mapping[str, Any], path: Path | str | None = None, against: str = "exact"
) -> Figure:
    """Error (against the float64 reference, or `against="paper"`: the paper's Euler
    map) versus NFE (left) and versus wall time (right), one line per solver and kind,
    log-log, each point labelled with its tolerance (`rtol`; `atol` is `atol_factor`
    times it) or its constant step (`dt`). The title says what is compared; the caption
    gives the model, sample count, flow, t1, dtype and the reference. Runs that did not
    reach t1 are left out and counted in the caption. Returns the `Figure`."""
    fig, axes = figure(2, 1, width=4.2, height=3.8)
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
        f"atol = {meta['atol_factor']:g} rtol" if "atol_factor" in meta else "",
        f"{reference.get('dtype', 'float64')} reference {solver_text(reference)}"
        if against == "exact" and reference.get("solver")
        else "",
        f"{failed} {'run' if failed == 1 else 'runs'} did not reach t1 (not drawn)"
        if failed
        else "",
    ]
    batch = meta.get("batch") or np.shape(reference.get("x_final", np.zeros((0,))))[0] or None
    what = f"Work against precision: error of x(t1) against {versus}; points labelled rtol or dt"

    def label_every_point(order):
        tidy_log_axes(fig)
        renderer, left_out = renderer_of(fig), 0  # one drawing fixes the layout
        for ax, x_key in zip(axes[0], ("nfe", "wall_s")):
            for name, kind in order:
                runs = groups[(name, kind)]
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

    def unlabel():
        for ax in axes[0]:
            for text in list(ax.texts):
                text.remove()

    # the series in their order, else the last first (the first labelled pick first)
    orders = [list(groups), list(groups)[::-1]]
    left_out = label_every_point(orders[0])
    if left_out:
        unlabel()
        reversed_out = label_every_point(orders[1])
        if reversed_out > left_out:
            unlabel()
            label_every_point(orders[0])
        else:
            orders.reverse()
            left_out = reversed_out
    if left_out:
        unlabel()  # say so, and place the labels again under the new title
        title(
            fig,
            what + " (some had no room)",
            caption(
                meta, samples=samples_text(meta, batch) if batch else None, solver="", extra=extra
            ),
        )
        label_every_point(orders[0])
    return finish(fig, path)
