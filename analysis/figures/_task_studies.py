"""The figures of the image and graph task studies: `plot_overshoot`,
`plot_graph_overshoot`, `plot_gradient_depth`, `plot_image_basins`. Each reads its
study's result only and computes nothing new."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ._plotting import (
    caption,
    figure,
    finish,
    nothing_to_show,
    positive,
    samples_text,
    title,
    wrap,
)


def plot_gradient_depth(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Left: parameter-gradient norm against horizon for each adjoint (the implicit
    gradient as a horizontal line), log-log. Right: `|dL/dx(s)|` along the longest
    trajectory. The caption gives the model, sample count, flow, horizons, dtype and
    solver. Returns the `Figure`."""
    fig, axes = figure(2, 1)
    ax = axes[0, 0]
    horizons = np.asarray(result["horizons"], float)
    meta = result.get("metadata", {})
    title(
        fig,
        "Do gradients vanish with depth? Parameter gradient per adjoint against the "
        "horizon T, and the adjoint state along the longest solve",
        caption(
            meta,
            samples=samples_text(meta, meta["batch"]) if "batch" in meta else None,
            horizon=f"T = {horizons.min():.3g} to {horizons.max():.3g} tau",
        ),
    )
    for name, rec in result["adjoints"].items():
        ax.plot(horizons, positive(rec["grad_norm"]), "-o", ms=3, label=name)
    if "implicit" in result:
        ax.axhline(
            result["implicit"]["grad_norm"],
            color="tab:red",
            ls="--",
            label="implicit (fixed point)",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("horizon T (tau)" + (" = steps x dt0" if result.get("steps") is not None else ""))
    ax.set_ylabel("|dL/dtheta| (L2, every parameter)")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    state = result["adjoint_state"]
    ax.plot(state["times"], positive(state["grad_norm"]), "-o", ms=3, label="|dL/dx(s)|")
    ax.plot(
        state["times"],
        positive(state["scaled_grad_norm"]),
        "-s",
        ms=3,
        label="|(s_A/gamma) dL/dx_A(s)|",
    )
    ax.set_yscale("log")
    ax.set_xlabel("split time s (tau)")
    ax.set_ylabel("|dL/dx(s)| (L2, whole batch)")
    ax.legend(fontsize=7)
    ax.set_title(f"adjoint state along the solve to T = {state['horizon']:g} tau", fontsize=8)
    return finish(fig, path)


def plot_graph_overshoot(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Test AUC (left) and energy (right) against time on a log axis, the training
    horizon marked; the caption gives the scored node count, the solve and the dtype.
    Returns the `Figure`."""
    fig, axes = figure(2, 1)
    meta = result.get("metadata", {})
    options = result.get("solve_options", {})
    title(
        fig,
        "Node anomaly detector past its training horizon: test AUC and energy against time",
        caption(
            meta,
            samples=samples_text(None, meta["n_scored"], "scored test nodes")
            if "n_scored" in meta
            else None,
            flow=options.get("flow"),
            horizon=f"t = 0 to {result['t_max']:.4g} tau",
            solver=options,
        ),
    )
    times = np.asarray(result["times"], float)
    shown = times > 0
    for ax, key, label in (
        (axes[0, 0], "auc", "test AUC"),
        (axes[0, 1], "energy", "energy E of the core (model units)"),
    ):
        ax.plot(times[shown], np.asarray(result[key], float)[shown], "-o", ms=3)
        ax.set_xscale("log")
        ax.axvline(
            result["horizon"],
            color="grey",
            ls="--",
            lw=1,
            label=f"training horizon ({result['horizon']:.3g} tau)",
        )
        ax.set_xlabel("time t (tau)")
        ax.set_ylabel(label)
        ax.legend(loc="best", fontsize=8)
    return finish(fig, path)


def _shown_order(result, shown):
    """Which decoded attractors the figure shows: those reached from the grid points
    nearest the two images first, then the most visited, lowest energy first."""
    plane, attractors = result["plane"], result["attractors"]
    labels = np.asarray(plane["labels_grid"])
    a, b = np.asarray(plane["a"]), np.asarray(plane["b"])
    first = []
    for pa, pb in plane["image_points"].values():
        label = int(labels[np.argmin(np.abs(a - pa)), np.argmin(np.abs(b - pb))])
        if label >= 0 and label not in first:
            first.append(label)
    rest = sorted(
        (i for i in range(len(attractors)) if i not in first),
        key=lambda i: (
            -(attractors[i]["plane_fraction"] + attractors[i]["random_fraction"]),
            attractors[i]["energy"],
        ),
    )
    order = [i for i in first + rest if attractors[i].get("decoded_image") is not None]
    return order[:shown], first


def plot_image_basins(
    result: Mapping[str, Any], path: Path | str | None = None, *, shown: int = 8
) -> Figure:
    """`image_basins`' result: the basin map of the plane (the two images marked; with
    more than ten attractors each start is coloured by the energy of the attractor it
    reached), each attractor's energy against its share of the plane's and of the random
    starts (where every start reached an attractor of its own, a sentence saying so
    instead), and `shown` attractors decoded as images (those reached from the two images
    first). Returns the `Figure`."""
    from matplotlib.colors import ListedColormap
    from matplotlib.ticker import MaxNLocator

    attractors = result["attractors"]
    plane, random = result["plane"], result["random"]
    energies = np.array([att["energy"] for att in attractors])
    categorical = len(attractors) <= 10
    colours = ["0.75"] + [f"C{i}" for i in range(len(attractors))]  # used when categorical
    fig = Figure(figsize=(9.0, 6.2), layout="constrained")
    top, bottom = fig.subfigures(2, 1, squeeze=False, height_ratios=[2.0, 1.0])[:, 0]
    map_ax, energy_ax = top.subplots(1, 2, width_ratios=[1.2, 1.0])
    labels = np.asarray(plane["labels_grid"])
    a, b = np.asarray(plane["a"]), np.asarray(plane["b"])
    extent = (b[0], b[-1], a[0], a[-1])
    if categorical:
        map_ax.imshow(
            labels + 1,
            cmap=ListedColormap(colours),
            vmin=0,
            vmax=len(colours) - 1,
            interpolation="nearest",
            aspect="auto",
            origin="lower",
            extent=extent,
        )
    else:
        reached = np.where(labels >= 0, energies[np.maximum(labels, 0)], np.nan)
        image = map_ax.imshow(
            reached,
            cmap="viridis",
            interpolation="nearest",
            aspect="auto",
            origin="lower",
            extent=extent,
        )
        top.colorbar(image, ax=map_ax, label="energy of the attractor reached")
    for name, (pa, pb) in plane["image_points"].items():
        map_ax.plot(pb, pa, marker="o", mfc="white", mec="black", ms=6)
        map_ax.annotate(
            name,
            (pb, pa),
            xytext=(6, 4),
            textcoords="offset points",
            fontsize=7,
            bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8),
        )
    map_ax.set_xlabel("b (random direction)")
    map_ax.set_ylabel("a (image 1 -> image 0)")
    entropy = plane["basin_entropy"]
    map_ax.set_title(
        f"plane: {labels.size} starts, {int(np.unique(labels[labels >= 0]).size)}"
        f" attractors, basin entropy {entropy['S_b']:.2g}",
        fontsize=8,
    )
    counts = [
        np.rint(np.asarray(part["fractions"], float) * starts)
        for part, starts in ((plane, labels.size), (random, len(random["labels"])))
    ]
    single = all(np.all(c <= 1) for c in counts)  # every attractor from one start only
    if single:
        energy_ax.set_axis_off()
        nothing_to_show(
            energy_ax,
            wrap(
                fig,
                f"every start reached an attractor of its own: no fractions to compare "
                f"({len(attractors)} attractors from {labels.size} plane and "
                f"{len(random['labels'])} random starts, one start each)",
                8,
                width_fraction=0.35,
            ),
        )
    for part, marker, name in ((plane, "o", "plane"), (random, "^", "random starts")):
        if single:
            break
        share = np.asarray(part["fractions"], float)
        hit = share > 0
        energy_ax.scatter(
            energies[hit],
            share[hit],
            marker=marker,
            s=22,
            label=name,
            c=[colours[i + 1] for i in np.flatnonzero(hit)] if categorical else None,
            edgecolors="black",
            linewidths=0.4,
        )
    energy_ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    energy_ax.set_xlabel("energy of the attractor")
    energy_ax.set_ylabel("fraction of starts reaching it")
    energy_ax.set_title(
        f"{random['distinct']} attractors from {len(random['labels'])} random starts", fontsize=8
    )
    if not single:
        energy_ax.legend(fontsize=7, loc="best")
    order, from_images = _shown_order(result, shown)
    if order:
        image_axes = bottom.subplots(1, len(order), squeeze=False)[0]
        for ax, i in zip(image_axes, order):
            att = attractors[i]
            ax.imshow(np.asarray(att["decoded_image"]), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            index_text = "?" if att["morse_index"] is None else att["morse_index"]
            where = " (image)" if i in from_images else ""
            ax.set_title(
                f"{i + 1}{where}\nE {att['energy']:.5g}\nindex {index_text}",
                fontsize=7,
                color=colours[i + 1] if categorical else "black",
            )
    meta = result.get("metadata", {})
    what = (
        f"Basins of the core: {len(attractors)} attractors; below, decoded, those the "
        "two images' grid points reach, then the most visited"
    )
    extra = [
        f"fixed-point stop RMS G {meta['fixed_point_atol']:.0e}"
        if meta.get("fixed_point_atol") is not None
        else "",
        f"match tol {meta['match_tol']:.0e}" if meta.get("match_tol") else "",
    ]
    title(
        fig,
        what,
        caption(meta, samples=f"{labels.size} + {len(random['labels'])} starts", extra=extra),
    )
    return finish(fig, path)


def plot_overshoot(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Masked-patch MSE (left) and the energy, median over images with the
    interquartile range (right), against time on a log axis, the training horizon
    marked. The caption gives the model, image count, solve, t_max and dtype. Returns
    the `Figure`."""
    fig, axes = figure(2, 1)
    times = np.asarray(result["times"], float)
    meta = result.get("metadata", {})
    options = result.get("solve_options", {})
    kind = (
        "fixed-point stop (median)"
        if result.get("horizon_kind") == "fixed_point"
        else "training horizon"
    )
    title(
        fig,
        f"Past the {kind}: masked-patch MSE and energy against time",
        caption(
            meta,
            samples=samples_text(meta, meta.get("n_images", len(result["energy"])), "images"),
            flow=options.get("flow"),
            horizon=f"t = 0 to {result['t_max']:.4g} tau",
            solver=options,
        ),
    )
    linthresh = max(float(times[times > 0].min()), 1e-6)
    ax = axes[0, 0]
    ax.plot(times, result["mse"], "-o", ms=3, label="all images")
    ax.set_ylabel("masked-patch MSE (normalised units)")
    ax = axes[0, 1]
    energy = np.asarray(result["energy"], float)
    ax.plot(times, np.median(energy, axis=0), color="tab:green", label="median")
    ax.fill_between(
        times,
        np.percentile(energy, 25, axis=0),
        np.percentile(energy, 75, axis=0),
        color="tab:green",
        alpha=0.25,
        label="interquartile",
    )
    ax.set_ylabel("energy E of the core (model units)")
    for ax in axes[0]:
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.axvline(
            result["horizon"],
            color="tab:red",
            ls="--",
            label=f"{kind} ({result['horizon']:.3g} tau)",
        )
        ax.set_xlabel("time t (tau)")
        ax.legend(fontsize=7)
    return finish(fig, path)


def plot_temperature_sweep(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Masked-patch MSE (left, the draws' range shaded) and the end state's energy over
    the same image's at `T = 0` (right, +- one standard deviation) against the
    temperature on a symmetric-log axis, `T = 0` (deterministic) the first point; the
    tolerated temperature marked. The
    caption gives the model, image count, draws, solve and dtype. Returns the
    `Figure`."""
    fig, axes = figure(2, 1)
    temperatures = np.asarray(result["temperatures"], float)
    meta = result.get("metadata", {})
    options = result.get("solve_options", {})
    title(
        fig,
        "At a temperature: masked-patch MSE and energy of the completion",
        caption(
            meta,
            samples=samples_text(meta, meta.get("n_images", 1), "images")
            + f" x {result['samples']} noise draws",
            flow=options.get("flow"),
            horizon=f"t = {result['horizon']:.3g} tau, {result['noise']} noise",
            solver=options,
        ),
    )
    positive = temperatures[temperatures > 0]
    linthresh = float(positive.min()) if positive.size else 1.0
    ax = axes[0, 0]
    ax.plot(temperatures, result["mse"], "-o", ms=3, label="mean of the draws")
    ax.fill_between(
        temperatures, result["mse_low"], result["mse_high"], alpha=0.25, label="range of the draws"
    )
    ax.axhline(
        (1 + result["tolerance"]) * result["mse"][0],
        color="tab:gray",
        ls=":",
        label=f"T = 0 + {result['tolerance']:.0%}",
    )
    ax.set_ylabel("masked-patch MSE (normalised units)")
    ax = axes[0, 1]
    rise, spread = np.asarray(result["energy_rise"]), np.asarray(result["energy_rise_std"])
    ax.plot(temperatures, rise, "-o", ms=3, color="tab:green", label="mean")
    ax.fill_between(
        temperatures, rise - spread, rise + spread, color="tab:green", alpha=0.25, label="+- 1 sd"
    )
    ax.set_ylabel("E(T) - E(0), same image")
    for ax in axes[0]:
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.set_xlim(0, float(temperatures.max()) * 1.5)
        ax.axvline(
            result["tolerated"],
            color="tab:red",
            ls="--",
            label=f"tolerated T = {result['tolerated']:.3g}",
        )
        ax.set_xlabel("temperature T (energy units)")
        ax.legend(fontsize=7)
    return finish(fig, path)


def plot_image_escape(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """Left: the energy along the minimum energy path from the image's fixed point to
    its nearest other memory, the polished saddle's barrier dashed. Right: the log of
    the mean escape time (95 % intervals) against `1/T`, the weighted fit and a line of
    slope the barrier (Kramers' law) through the same centre. The caption gives the
    model, paths, flow, horizon, step and dtype. Returns the `Figure`."""
    fig, axes = figure(2, 1)
    escapes = result["escapes"]
    meta = result.get("metadata", {})
    title(
        fig,
        "Escapes between two memories at a temperature, against Kramers' law",
        caption(
            meta,
            samples=f"1 image, {escapes['paths']} paths per T",
            flow=result["flow"],
            horizon=f"t1 = {escapes['t1']:.3g} tau",
            solver=f"Euler-Maruyama, dt {escapes['dt0']:.3g}",
        ),
    )
    ax = axes[0, 0]
    ax.plot(result["path_arclength"], result["path_energies"], "-o", ms=3, label="the path")
    ax.axhline(
        result["barrier"],
        color="tab:red",
        ls="--",
        label=f"saddle (Morse index {result['morse_index']}): {result['barrier']:.3g}",
    )
    ax.set_xlabel("distance along the path (RMS in g)")
    ax.set_ylabel("E - E(image's fixed point)")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    inverse = 1 / np.asarray(escapes["temperatures"], float)
    mean = np.asarray(escapes["mean"], float)
    low, high = np.asarray(escapes["low"], float), np.asarray(escapes["high"], float)
    seen = np.isfinite(mean)
    if not seen.any():
        nothing_to_show(ax, "no path escaped")
        return finish(fig, path)
    ax.errorbar(
        inverse[seen],
        np.log(mean[seen]),
        yerr=[np.log(mean[seen] / low[seen]), np.log(high[seen] / mean[seen])],
        fmt="o",
        ms=4,
        capsize=3,
        label="log mean escape time (95 %)",
    )
    centre = inverse[seen].mean()
    span = np.linspace(inverse.min(), inverse.max(), 2)
    if np.isfinite(escapes["slope"]):
        ax.plot(
            span,
            escapes["intercept"] + escapes["slope"] * span,
            color="tab:blue",
            label=f"fit: slope {escapes['slope']:.3g}",
        )
        level = escapes["intercept"] + escapes["slope"] * centre
        ax.plot(
            span,
            level + result["barrier"] * (span - centre),
            color="tab:red",
            ls="--",
            label=f"slope = barrier ({result['barrier']:.3g})",
        )
    ax.set_xlabel("1 / T")
    ax.set_ylabel("log(mean escape time / tau)")
    ax.legend(fontsize=7)
    return finish(fig, path)
