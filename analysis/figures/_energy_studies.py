"""The figures of the studies of an energy system: `plot_convergence`,
`plot_contributions`, `plot_energy_descent`, `plot_fixed_points`, `plot_stability`. Each
reads its study's result only (the typed result, or a dict with its keys) and computes
nothing new."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..energy import quoted_decay
from ._plotting import (
    FLOW_COLOURS,
    caption,
    figure,
    finish,
    model_name,
    nothing_to_show,
    positive,
    samples_text,
    title,
    wrap,
)


def plot_convergence(
    result: Mapping[str, Any], path: Path | str | None = None, sample: int | None = None
) -> Figure:
    """Four panels against time (log axes), one colour per flow: RMS residual `|G|`, RMS
    `|dg/dt|`, `|dE/dt|` and each token's scale `s_A`, every image of a batched result
    (or only image `sample`). On the residual panel, dashed, each image's fit of the
    decay law the flow follows (`quoted_decay`: the projected flow's exponential, the
    native flow's power law over the last decade), and in the legend that fit as the
    summary quotes it (one image's value, or the median over the images with its range,
    and r^2). The caption gives the model, the number of images drawn, the horizon,
    dtype and solver. Returns the `Figure`."""
    fig, axes = figure(2, 2)
    times = np.asarray(result["times"], float)
    batched = bool(result.get("batched"))

    def rows(values):
        """`[B, T, ...]`: the images drawn."""
        values = np.asarray(values, float)
        values = values if batched else values[None]
        return values[[sample]] if sample is not None else values

    count = len(rows(next(iter(result["flows"].values()))["residual_rms"]))
    panels = [
        ("residual_rms", "RMS residual |G|"),
        ("dgdt_rms", "RMS |dg/dt| (1/tau)"),
        ("abs_dEdt", "|dE/dt| (energy/tau)"),
    ]
    link = max(times[times > 0].min(), 1e-6)
    for (key, label), ax in zip(panels, axes.ravel()):
        for flow, rec in result["flows"].items():
            for number_, trace in enumerate(rows(rec[key])):
                name = flow if count == 1 else f"{flow} ({count} images)"
                ax.plot(
                    times,
                    positive(trace),
                    color=FLOW_COLOURS.get(flow),
                    lw=1.2 if count == 1 else 0.8,
                    label=name if number_ == 0 and ax is axes[0, 0] else None,
                )
        ax.set_xscale("symlog", linthresh=link)
        ax.set_yscale("log")
        ax.set_xlabel("time t (tau)")
        ax.set_ylabel(label)
    ax = axes[0, 0]
    for flow, rec in result["flows"].items():
        record = rec
        if sample is not None and batched:  # the one image drawn
            record = {
                k: {f: np.asarray(v)[sample] for f, v in rec[k].items()}
                for k in ("fit", "power_law")
            }
        quoted = quoted_decay(record, flow)
        drawn = False
        fits = zip(rows(rec["residual_rms"]), quoted["per_image"], quoted["windows"])
        for g, value, window in fits:
            if not np.isfinite(value):
                continue
            if quoted["law"] == "power_law":  # fitted over the last decade of the times
                lo, hi = times[-1] / 10, times[-1]
                t = np.geomspace(lo, hi, 20)
                start = np.interp(np.log(lo), np.log(times[1:]), np.log(positive(g[1:])))
                curve = np.exp(start) * (t / lo) ** -value
            else:
                lo, hi = window
                t = np.linspace(lo, hi, 20)
                curve = np.interp(lo, times, g) * np.exp(-value * (t - lo))
            ax.plot(
                t,
                curve,
                ls=(0, (4, 2)),
                lw=1,
                color="k" if flow == "projected" else "0.45",
                label=None if drawn else f"{flow} fit: {quoted['text']}",
            )
            drawn = True
    meta = result.get("metadata", {})
    first = next(iter(result["flows"].values()))
    total = len(np.asarray(first["residual_rms"], float).reshape(-1, times.size))
    samples = samples_text(meta, count)
    if sample is not None:
        samples = f"image {sample} of {samples_text(meta, total)}"
    title(
        fig,
        "Convergence to a fixed point: residual, |dg/dt|, |dE/dt| and token scales against time",
        caption(meta, samples=samples),
    )
    fig.legend(loc="outside lower center", ncols=2, fontsize=7)
    ax = axes[1, 1]
    if any(rec.get("scales") is None for rec in result["flows"].values()):
        ax.set_axis_off()  # a model without token scales
        nothing_to_show(ax, "the model has no token scales")
        return finish(fig, path)
    for flow, rec in result["flows"].items():
        for scales in rows(rec["scales"]):
            ax.plot(times, scales, color=FLOW_COLOURS.get(flow), lw=0.6 if count > 1 else 0.8)
    ax.set_xscale("symlog", linthresh=link)
    ax.set_yscale("log")
    ax.set_xlabel("time t (tau)")
    ax.set_ylabel("token scale s_A (x units; every token)")
    return finish(fig, path)


def plot_contributions(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Mean per-token norm of the attention and Hopfield parts of the update against
    time, on masked (solid) and visible (dashed) tokens; batched results show the
    median over samples. The caption gives the model, sample count, flow, times, dtype
    and solver. Returns the `Figure`."""
    fig, axes = figure(2, 1)
    times = np.asarray(result["times"], float)
    meta = result.get("metadata", {})
    batch = meta.get("batch") or (
        np.shape(result["total"]["masked"])[0] if result.get("batched") else 1
    )
    title(
        fig,
        "Which term moves the tokens: the attention and Hopfield parts of the "
        f"update{' (median over samples)' if result.get('batched') else ''}",
        caption(
            meta,
            samples=samples_text(meta, batch),
            horizon=f"t = {times[0]:.3g} to {times[-1]:.3g} tau",
            extra=[f"{meta['n_masked']} masked tokens" if "n_masked" in meta else ""],
        ),
    )
    median = (
        (lambda v: np.nanmedian(np.asarray(v, float), axis=0))
        if result.get("batched")
        else (lambda v: np.asarray(v, float))
    )
    ax = axes[0, 0]
    colours = dict(attention="tab:blue", hopfield="tab:green", external="tab:purple", total="k")
    for name in ("attention", "hopfield", "total"):
        for where, style in (("masked", "-"), ("visible", "--")):
            ax.plot(
                times,
                positive(median(result[name][where])),
                style,
                color=colours[name],
                label=f"{name}, {where}",
            )
    ax.set_yscale("log")
    ax.set_xlabel("time t (tau)")
    ax.set_ylabel("mean |part of update| per token (x/tau)")
    ax.legend(fontsize=7, ncols=2)
    ax = axes[0, 1]
    for where, style in (("masked", "-"), ("visible", "--")):
        ax.plot(times, median(result["attention_fraction"][where]), style, label=where)
    ax.set_ylim(0, 1)
    ax.set_xlabel("time t (tau)")
    ax.set_ylabel("attention share |att| / (|att| + |hop|)")
    ax.legend(fontsize=7)
    return finish(fig, path)


def plot_energy_descent(
    result: Mapping[str, Any], path: Path | str | None = None, sample: int = 0
) -> Figure:
    """Left: `E - min E` against time for each run (log scale), real rises marked with
    red crosses. Right: the number of real and round-off rises per run, or, where E never
    rose in any run, a sentence saying so (no empty bars). Batched results show `sample`
    on the left and totals on the right. The caption gives the model,
    sample count, flow, t1, dtype and the round-off allowance; the legend the solver and
    step or tolerance of each run. Returns the `Figure`."""
    fig, axes = figure(2, 1)
    ax = axes[0, 0]
    runs = result["runs"]
    meta = result.get("metadata", {})
    batch = meta.get("batch") or (len(runs[0]["energies"]) if result.get("batched") else 1)
    shown = f" (left: sample {sample})" if result.get("batched") else ""
    title(
        fig,
        "Energy descent along each solve: steps where E rose, real (red x) or within "
        f"round-off{shown}",
        caption(
            meta,
            samples=samples_text(meta, batch),
            solver="",
            extra=[
                f"round-off: rises below {meta['roundoff_ulps']:g} ulp x |E|"
                if "roundoff_ulps" in meta
                else ""
            ],
        ),
    )
    pick = (lambda v: v[sample]) if result.get("batched") else (lambda v: v)
    floor = min(float(np.min(pick(run["energies"]))) for run in runs)
    for run in runs:
        ts, e = np.asarray(pick(run["energy_ts"])), np.asarray(pick(run["energies"]))
        (line,) = ax.plot(ts, positive(e - floor), lw=1, label=run["label"])
        steps = np.asarray(pick(run["rises"])["real_rise_steps"], int)
        if steps.size:
            ax.plot(ts[steps + 1], positive(e[steps + 1] - floor), "x", color="tab:red", ms=6)
    ax.set_yscale("log")
    ax.set_xlabel("time t (tau)")
    ax.set_ylabel("E - min E (energy units)")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    most = max(max(run["real_rises"], run["roundoff_rises"]) for run in runs)
    if most == 0:  # nothing to count: the panel says so
        ax.set_axis_off()
        total = sum(int(np.sum(np.atleast_1d(run["num_steps"]))) for run in runs)
        nothing_to_show(
            ax,
            wrap(
                fig,
                f"E never rose: no step of the {len(runs)} runs ({total} steps in all, "
                f"{samples_text(meta, batch)}) raised it, not even within round-off",
                8,
                width_fraction=0.4,
            ),
        )
        return finish(fig, path)
    index = np.arange(len(runs))
    ax.bar(index - 0.2, [run["real_rises"] for run in runs], 0.4, label="real", color="tab:red")
    ax.bar(
        index + 0.2, [run["roundoff_rises"] for run in runs], 0.4, label="round-off", color="0.6"
    )
    ax.set_xticks(
        index,
        [run["label"] for run in runs],
        rotation=30,
        ha="right",
        rotation_mode="anchor",
        fontsize=7,
    )
    ax.set_ylabel("steps where E rose (count)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, most * 1.15)  # counts: from zero, never below
    ax.legend(fontsize=7)
    return finish(fig, path)


def plot_fixed_points(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Left: the matrix of distances between fixed points (log colour scale, entries
    below `distance_tol` marked as the same point). Right: the energy of each fixed
    point, coloured by cluster. Returns the `Figure`."""
    from matplotlib.colors import LogNorm

    fig, axes = figure(2, 1)
    ax = axes[0, 0]
    d = np.asarray(result["distances"], float)
    tol = result["metadata"]["distance_tol"]
    shown = np.where(d > 0, d, tol / 10)
    norm = LogNorm(vmin=min(shown.min(), tol / 10), vmax=max(shown.max(), tol))
    image = ax.imshow(shown, norm=norm, cmap="viridis")
    fig.colorbar(image, ax=ax, label="RMS |g*_i - g*_j|")
    for i, j in zip(*np.nonzero(d < tol)):
        ax.text(j, i, "=", ha="center", va="center", color="w", fontsize=8)
    ax.set_xticks(
        range(len(result["labels"])), result["labels"], rotation=45, ha="right", fontsize=7
    )
    ax.set_yticks(range(len(result["labels"])), result["labels"], fontsize=7)
    ax.set_title(
        f"{result['n_distinct']} distinct, path independence {result['path_independence']:.2f}"
    )
    ax = axes[0, 1]
    ax.scatter(
        range(len(result["energy"])),
        result["energy"],
        c=result["cluster"],
        cmap="tab10",
        vmin=0,
        vmax=9,
    )
    ax.set_xticks(
        range(len(result["labels"])), result["labels"], rotation=45, ha="right", fontsize=7
    )
    ax.set_ylabel("energy E at the fixed point")
    ax.set_title("colour: fixed point (cluster)")
    meta = result.get("metadata", {})
    title(
        fig,
        "Do different starts reach the same fixed point? Distances between the fixed "
        "points and their energies",
        caption(meta, samples=f"{len(result['labels'])} starts"),
    )
    return finish(fig, path)


def plot_stability(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Eigenvalues of the tangent Hessian at the polished point (all of them when dense,
    else the `k` smallest and largest), sorted, negative ones marked, with the one-sided
    extremes where kinks are in reach; and the Lyapunov exponent's local rates over
    time beside the linearised flow's range. The title is the verdict; a caption line
    gives the model, dtype, method, residual and tolerances. Returns the `Figure`."""
    fig, axes = figure(2, 1, height=3.6)
    ax = axes[0, 0]
    values = (
        result["all"]
        if result.get("all") is not None
        else np.concatenate([result["smallest"], result["largest"]])
    )
    values = np.sort(np.asarray(values, float))
    index = np.arange(values.size)
    negative = values < -result["zero_tol"]
    ax.plot(index[~negative], values[~negative], "o", ms=3, label="non-negative")
    ax.plot(
        index[negative],
        values[negative],
        "o",
        ms=4,
        color="tab:red",
        label=f"negative ({int(negative.sum())})",
    )
    for side, marker in (("lower", "v"), ("upper", "^")):
        sides = result.get("sides") or {}
        if side in sides:
            ax.plot(
                [0],
                [float(sides[side]["smallest"][0])],
                marker,
                color="tab:purple",
                ms=5,
                label=f"{side} side's smallest",
            )
    ax.axhline(0.0, color="0.5", lw=0.8)
    magnitudes = np.abs(values[values != 0])
    if np.all(values > 0):
        ax.set_yscale("log")
        ax.set_ylim(values.min() / 2.0, values.max() * 2.0)
    elif magnitudes.size and magnitudes.max() > 1e3 * magnitudes.min():
        # symlog, linear over the last 3 decades below the largest magnitude: a linear
        # region narrower than that crowds its tick labels (-10^-1, 0, 10^-1)
        top = float(magnitudes.max())
        ax.set_yscale("symlog", linthresh=10.0 ** np.floor(np.log10(top) - 3.0))
        ax.margins(y=0.15)
    else:
        ax.margins(y=0.15)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(
        "eigenvalue index (sorted)"
        if result.get("all") is not None
        else f"index ({len(result['smallest'])} smallest, then largest)"
    )
    units = "energy coords" if result["coordinates"] == "g" else "x coords, rate x tau"
    ax.set_ylabel("tangent Hessian eigenvalue")
    ax.set_title(
        f"Hessian ({units}), {result['method']}, dim {result.get('dimension')}", fontsize=9
    )
    ax.legend(fontsize=8, loc="best")
    ax = axes[0, 1]
    lyap = result.get("lyapunov")
    if lyap is not None:
        ax.plot(lyap["times"], lyap["local"], "-o", ms=3, label="local rate per segment")
        ax.axhline(
            lyap["exponent"], color="tab:red", ls="--", label=f"FTLE {lyap['exponent']:.3g} / tau"
        )
        band = (result.get("verdict") or {}).get("lyapunov_range")
        local = np.concatenate([np.asarray(lyap["local"], float), [lyap["exponent"]]])
        low, high = float(np.min(local)), float(np.max(local))
        pad = 0.2 * max(high - low, 0.1 * max(abs(low), abs(high)), 1e-3)
        if band is not None:
            ax.axhspan(
                band[0],
                band[1],
                color="0.85",
                zorder=0,
                label=f"linearised range [{band[0]:.3g}, {band[1]:.3g}]",
            )
        ax.set_ylim(low - pad, high + pad)  # the data; the range may extend past it
        ax.set_xlim(0.0, float(lyap["t1"]))
        ax.set_xlabel("time t (tau)")
        measured = {"g": "|dg|", "metric": "|C^1/2 dx|"}.get(lyap.get("coordinates"), "|dg|")
        ax.set_ylabel(f"growth rate of {measured} (1/tau)")
        ax.set_title(
            f"Lyapunov, {lyap['flow']} flow, {lyap['solver']} rtol {lyap['rtol']}", fontsize=9
        )
        ax.legend(fontsize=8, loc="best")
    else:
        ax.set_axis_off()
    meta = dict(result.get("metadata", {}))
    if model_name(meta) is None and meta.get("model_type"):
        meta["model"] = meta["model_type"]
    polish = result.get("polish", {})
    words = [
        f"{result.get('geometry', '')} geometry",
        f"point Newton-polished to RMS G {polish.get('residual_rms', float('nan')):.2g} "
        f"(from {polish.get('residual_rms_before', float('nan')):.2g})",
    ]
    sentence = (result.get("verdict") or {}).get("sentence", "stability")
    title(
        fig,
        sentence,
        # one fixed point: of one image's start, for a job (its metadata has `data`)
        caption(
            meta,
            samples=samples_text(meta, 1, "starts"),
            flow=result.get("flow"),
            solver="",
            extra=words,
        ),
    )
    return finish(fig, path)
