"""The figure of a `long_horizon` result (`plot_long_horizon`). Reads the result only
(a `LongHorizon`, or a dict with its keys); computes nothing new."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from .._common import energy_noise
from .._common import short_number as _g
from ..energy import decay_curve
from ._plotting import (
    FLOW_COLOURS,
    caption,
    figure,
    finish,
    model_name,
    positive,
    samples_text,
    title,
)


def _figure_caption(result: Mapping[str, Any]) -> str:
    meta = dict(result.get("metadata", {}))
    if model_name(meta) is None:
        meta["model"] = meta.get("model_type")
    solvers_used = meta.get("solver") or {}
    if isinstance(solvers_used, dict):
        solvers_used = ", ".join(f"{f} {s}" for f, s in solvers_used.items())
    solver_part = f"{solvers_used}; rtol {_g(meta.get('rtol'))}, atol {_g(meta.get('atol'))}"
    extra = [f"fixed point: RMS G < {_g(meta.get('fixed_point_tol'))}"]
    if meta.get("hold_tol") is not None:
        extra.append(f"projected flow held below RMS G {_g(meta['hold_tol'])}")
    # `long_horizon` follows one state: one image of a job (its metadata has `data`)
    return caption(meta, samples=samples_text(meta, 1), solver=solver_part, extra=extra)


def plot_long_horizon(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Six panels against time (log axes), one colour per flow, under a title and a
    caption line (model, the one image or sample followed, horizon, dtype, flows and
    solvers, tolerances): E(t) - E_ref
    with the one reference named, RMS G with the chosen decay law dashed and the
    fixed-point tolerance dotted, token scales (median, min-max band; absent for a model
    without them), the error named after `metadata["error"]` (if recorded), the mean
    accepted step size per interval (rejected steps marked), and the finite-time
    Lyapunov exponents against the horizon. Held (not integrated) times are dashed.
    Returns the `Figure`."""
    fig, axes = figure(3, 2, height=3.0)
    meta = result.get("metadata", {})
    times = np.asarray(result["times"], float)
    link = max(times[times > 0].min(), 1e-6)
    reference = result.get("energy_reference") or {}
    ax_energy, ax_g, ax_scales = axes[0]
    ax_error, ax_step, ax_lyap = axes[1]
    has_scales = has_error = False
    for flow, rec in result["flows"].items():
        colour = FLOW_COLOURS.get(flow)
        held = np.asarray(rec["held"], bool)
        live = ~held
        live[1:] |= ~held[:-1]  # draw the live line up to the first held point

        def line(ax, values, **kw):
            values = np.asarray(values, float)
            ax.plot(times[live], values[live], color=colour, **kw)
            if held.any():
                first = max(int(np.argmax(held)) - 1, 0)
                ax.plot(times[first:], values[first:], color=colour, ls="--", lw=0.8)

        above = np.asarray(rec.get("energy_above_reference"), float)
        if reference.get("value") is not None:  # differences below round-off: not shown
            noise = energy_noise(reference["value"])
            line(ax_energy, np.where(above > noise, above, np.nan), label=flow)
        line(ax_g, positive(rec["residual_rms"]), label=flow)
        decay = rec["decay"]
        window = decay.get("window")
        span = np.geomspace(window[0], window[1], 40) if window else None
        curve = None if span is None else decay_curve(decay, span)
        if curve is not None:  # the chosen law, over the window it was fitted on
            what = (
                f"exp., rate {_g(decay['rate'])}/tau (late {_g(decay['late']['rate'])})"
                if decay["law"] == "exponential"
                else f"t^-{_g(decay['rate'])} (late t^-{_g(decay['late']['rate'])})"
            )
            ax_g.plot(
                span,
                curve,
                ls=(0, (4, 2)),
                lw=1.2,
                color="k" if flow == "projected" else "0.45",
                label=f"{flow} fit: {what}",
            )
        if rec.get("t_fixed_point") is not None:
            ax_g.plot(
                [rec["t_fixed_point"]],
                [meta.get("fixed_point_tol")],
                "o",
                ms=4,
                mfc="none",
                color=colour,
            )
        if rec.get("scales_median") is not None:
            has_scales = True
            line(ax_scales, rec["scales_median"], label=flow)
            ax_scales.fill_between(
                times, rec["scales_min"], rec["scales_max"], color=colour, alpha=0.2, lw=0
            )
        if np.isfinite(np.asarray(rec["error"], float)).any():
            has_error = True
            line(ax_error, positive(rec["error"]), label=flow)
        seg = rec["segments"]
        if len(seg["t1"]):
            ax_step.step(
                seg["t1"], positive(seg["mean_step"]), where="pre", color=colour, label=flow
            )
            mark = np.asarray(seg["rejected"], float) > 0
            ax_step.plot(
                np.asarray(seg["t1"])[mark],
                positive(seg["mean_step"])[mark],
                "x",
                color=colour,
                ms=4,
            )
        lyap = rec["lyapunov"]
        if lyap is not None:
            ax_lyap.plot(lyap["horizons"], lyap["median"], "-o", color=colour, ms=3, label=flow)
    if meta.get("fixed_point_tol") is not None:
        ax_g.axhline(
            meta["fixed_point_tol"],
            color="0.5",
            lw=0.8,
            ls=":",
            label="fixed-point tol (o: reached)",
        )
    value = reference.get("value")
    ax_energy.set_title(
        "energy above one reference\nE_ref = "
        + (f"{_g(value, 6)}: {_short_reference(reference)}" if value is not None else "n/a"),
        fontsize=8,
    )
    ax_g.set_title("RMS residual G, decay law (dashed)", fontsize=8)
    ax_scales.set_title("token scales s_A", fontsize=8)
    ax_error.set_title("error of the state", fontsize=8)
    ax_step.set_title("solver: mean accepted step", fontsize=8)
    ax_lyap.set_title("perturbations: finite-time Lyapunov exp.", fontsize=8)
    panels = [
        (ax_energy, "E(t) - E_ref"),
        (ax_g, "RMS G"),
        (ax_scales, "s_A (median, min-max)"),
        (ax_error, meta.get("error") or "error"),
        (ax_step, "step (tau; x: rejections)"),
    ]
    for ax, label in panels:
        ax.set_xscale("symlog", linthresh=link)
        ax.set_xlim(0, times[-1])
        ax.set_yscale("log")
        ax.set_xlabel("time t (tau)")
        ax.set_ylabel(label)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6.5)
    for ax, present, why in (
        (ax_scales, has_scales, "the model has no token scales"),
        (ax_error, has_error, "no error recorded (error_fn=None)"),
    ):
        if not present:
            ax.set_yscale("linear")
            ax.set_yticks([])
            ax.text(
                0.5,
                0.5,
                why,
                transform=ax.transAxes,
                ha="center",
                va="center",
                fontsize=7,
                color="0.4",
            )
    letter = next(
        (
            rec["lyapunov"]["coordinates"]
            for rec in result["flows"].values()
            if rec["lyapunov"] is not None
        ),
        "x",
    )
    ax_lyap.set_xscale("log")
    ax_lyap.set_xlabel("horizon T (tau)")
    ax_lyap.set_ylabel(f"log(|d{letter}(T)| / |d{letter}(0)|) / T  (1/tau)")
    if ax_lyap.get_legend_handles_labels()[0]:
        ax_lyap.axhline(0.0, color="0.5", lw=0.8)
        ax_lyap.legend(fontsize=6.5)
    else:  # words, and no zero line under them
        ax_lyap.text(
            0.5,
            0.5,
            "not computed",
            transform=ax_lyap.transAxes,
            ha="center",
            va="center",
            fontsize=7,
            color="0.4",
        )
    title(
        fig,
        "Long horizons: energy, residual, scales, error, steps and perturbation "
        "growth of each flow",
        _figure_caption(result),
    )
    return finish(fig, path)


def _short_reference(reference: Mapping[str, Any]) -> str:
    if reference.get("at_fixed_point"):
        return f"{reference['flow']} fixed point"
    return f"lowest recorded ({reference['flow']}, t = {_g(reference['time'])})"
