"""Figures of the landscape studies: the bifurcation diagram of `continuation` (and
`switch_branch`), the fold curves of `fold_continuation`, the basin map of `basins`, the
attractor tracks of `basin_continuation`, the running Lyapunov exponents of
`lyapunov_spectrum`."""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from jaxtyping import Array, Float
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ._plotting import caption, figure, finish, number, title

# A branch of `continuation` (or `switch_branch`), or several: typed results (`Branch`,
# `FoldCurve`) or the dicts they read as.
Branches = Mapping[str, Any] | list[Mapping[str, Any]] | tuple[Mapping[str, Any], ...]
# Grid coordinates as `grid_starts` returns them.
GridAxis = Float[Array | np.ndarray, " R"] | Sequence[float]

KIND_MARKERS = {
    "fold": ("s", "tab:red"),
    "branch_point": ("D", "tab:purple"),
    "hopf": ("*", "tab:green"),
}
KIND_NAMES = {"fold": "fold", "branch_point": "branch point", "hopf": "Hopf"}


def _runs(flags):
    """`(start, stop, flag)` for each run of equal consecutive `flags` (segments
    `start..stop - 1`, so points `start..stop`)."""
    flags = np.asarray(flags, bool)
    edges = np.flatnonzero(np.diff(flags.astype(int))) + 1
    starts = np.concatenate([[0], edges])
    stops = np.concatenate([edges, [flags.size]])
    return [(int(a), int(b), bool(flags[a])) for a, b in zip(starts, stops)]


def _with_bifurcations(branch, values, reference):
    """The branch's `p`, observable (`values` per point), stability and leading
    eigenvalue's real part with each bifurcation inserted where it lies (by arclength),
    so that a line changes style there and not at the nearest computed point: the
    bifurcation takes the stability of the point before it, and its observable is its
    state's (with `reference`) or else interpolated in arclength."""
    p = list(np.asarray(branch["p"], float))
    value = list(values)
    stable = list(np.asarray(branch["stable"], bool))
    leading = list(np.asarray(branch["eigenvalues"])[:, 0].real)
    s = list(np.asarray(branch["s"], float))
    for b in sorted(branch["bifurcations"], key=lambda b: b["s"]):
        at = int(np.searchsorted(s, b["s"]))
        if not 0 < at < len(s):
            continue
        if "x" in b and reference is not None:
            x = np.asarray(b["x"], float).ravel()
            observable = (
                float(x[0]) if x.size == 1 else float(np.sqrt(np.mean((x - reference) ** 2)))
            )
        else:
            observable = float(np.interp(b["s"], s, value))
        for series, item in (
            (p, b["p"]),
            (value, observable),
            (stable, stable[at - 1]),
            (leading, float(np.asarray(b["eigenvalues"])[0].real)),
            (s, b["s"]),
        ):
            series.insert(at, item)
    return (np.asarray(p), np.asarray(value), np.asarray(stable, bool), np.asarray(leading))


def _observable(result, reference):
    """One number per point of a branch: the state itself when it has one entry, else the
    RMS distance of the state from `reference` (the first branch's first point)."""
    x = np.asarray(result["x"], float).reshape(len(result["p"]), -1)
    if x.shape[1] == 1:
        return x[:, 0], "steady state x"
    return (
        np.sqrt(np.mean((x - reference) ** 2, axis=1)),
        "RMS distance from the first state",
    )


def plot_continuation(
    result: Branches,
    path: Path | str | None = None,
    *,
    labels: Sequence[str] | None = None,
    observable: str | None = None,
    observable_label: str | None = None,
) -> Figure:
    """The bifurcation diagram of one branch or a list of branches (`continuation`,
    `switch_branch`): left, the steady state (or its RMS distance from the first branch's
    first point; or the per-point entry `observable` of each branch, named
    `observable_label`) against `p`, solid where stable, dashed where not, each
    bifurcation marked and named (hollow, "not located", and "near p" in the title where
    its bisection did not reach `locate_tol`: `located` False); right, the real part of
    the leading eigenvalue against `p`, with zero marked. The caption gives the points,
    Newton's tolerance and, for a branch that ended before its requested `p_span`
    (`max_points`, `ds_min`), where and why. `labels`: a name per branch. Returns the
    `Figure`."""
    branches = result if isinstance(result, (list, tuple)) else [result]
    labels = labels or [f"branch {i + 1}" for i in range(len(branches))]
    reference = None if observable is not None else np.asarray(branches[0]["x"][0], float).ravel()
    fig, axes = figure(2, 1, height=3.4)
    found, stops = [], []
    for number_, (branch, label) in enumerate(zip(branches, labels)):
        colour = f"C{number_}"
        if observable is None:
            per_point, ylabel = _observable(branch, reference)
        else:
            per_point = np.asarray(branch[observable], float)
            ylabel = observable_label or observable
        p, value, stable, leading = _with_bifurcations(branch, per_point, reference)
        for ax, y in ((axes[0, 0], value), (axes[0, 1], leading)):
            _plot_by_stability(ax, p, y, stable, colour)
        axes[0, 0].plot([], [], "-", color=colour, label=f"{label}: stable")
        if not stable[1:].all():
            axes[0, 0].plot([], [], "--", color=colour, label=f"{label}: unstable")
        value_points = per_point
        for b in branch["bifurcations"]:
            marker, colour_b = KIND_MARKERS[b["kind"]]
            y_b = (
                float(np.asarray(b["x"], float).ravel()[0])
                if observable is None and np.size(b["x"]) == 1
                else float(np.interp(b["s"], np.asarray(branch["s"], float), value_points))
            )
            located = b.get("located", True) is not False
            axes[0, 0].plot(
                [b["p"]],
                [y_b],
                marker,
                color=colour_b,
                mfc=colour_b if located else "white",
                ms=7,
                zorder=5,
            )
            found.append(
                f"{KIND_NAMES[b['kind']]} at p = {b['p']:.4g}"
                if located
                else f"{KIND_NAMES[b['kind']]} near p = {b['p']:.4g} (not located)"
            )
        ended = _short_of_span(branch)
        if ended:
            stops.append(f"{label} {ended}" if len(branches) > 1 else ended)
    axes[0, 0].set_xlabel("parameter p")
    axes[0, 0].set_ylabel(ylabel)
    for kind, (marker, colour_b) in KIND_MARKERS.items():
        for located in (True, False):
            if any(
                b["kind"] == kind and (b.get("located", True) is not False) == located
                for branch in branches
                for b in branch["bifurcations"]
            ):
                axes[0, 0].plot(
                    [],
                    [],
                    marker,
                    color=colour_b,
                    mfc=colour_b if located else "white",
                    label=KIND_NAMES[kind] + ("" if located else " (not located)"),
                )
    axes[0, 0].legend(fontsize=7, loc="best")
    axes[0, 0].set_title("steady states (dashed: unstable)", fontsize=9)
    axes[0, 1].axhline(0.0, color="0.5", lw=0.8)
    axes[0, 1].set_xlabel("parameter p")
    axes[0, 1].set_ylabel("Re of the leading eigenvalue (1/time)")
    axes[0, 1].set_title("stability: leading eigenvalue of df/dx", fontsize=9)
    meta = branches[0].get("metadata", {})
    what = "Steady states followed in p: " + (
        "; ".join(found) if found else "no bifurcation on the branch"
    )
    extra = [
        f"{sum(len(b['p']) for b in branches)} points",
        "dense" if branches[0].get("dense") else "matrix-free",
        f"Newton tol {number(meta['tol'])}" if meta.get("tol") is not None else "",
        f"parameter {meta['parameter']}" if meta.get("parameter") else "",
        *stops,
    ]
    title(fig, what, caption(meta, extra=extra))
    return finish(fig, path)


def _short_of_span(branch: Mapping[str, Any]) -> str:
    """Where a branch ended before its requested `p_span` (`metadata["p_span"]`), and
    why (`stop_reason`: `"max_points"`, `"ds_min"`; a closed loop is no shortfall), as
    the caption says it; empty where it reached the span's end. A branch without a
    stop reason ended short where its last `p` lies inside the span."""
    p = np.asarray(branch["p"], float)
    span = (branch.get("metadata") or {}).get("p_span")
    reason = branch.get("stop_reason")
    if reason in ("p_span", "closed") or p.size == 0:
        return ""
    if span is None:
        return f"stopped by {reason} at p = {p[-1]:.4g}" if reason else ""
    low, high = sorted(float(v) for v in span)
    if reason is None and not low < p[-1] < high:
        return ""
    why = f"by {reason} " if reason else ""
    return f"stopped {why}at p = {p[-1]:.4g}, short of the span {low:.4g} to {high:.4g}"


def _kind(attractor: Mapping[str, Any]) -> str:
    """What a legend says of an attractor: its Morse index, or, where the residual is no
    gradient (no index), whether the flow's eigenvalues make it stable."""
    if attractor.get("gradient") is False:
        return "stable" if attractor["stable"] else "unstable"
    index = attractor["morse_index"]
    return f"index {'?' if index is None else index}"


def plot_basins(
    result: Mapping[str, Any],
    path: Path | str | None = None,
    *,
    a: GridAxis | None = None,
    b: GridAxis | None = None,
    axis_labels: Sequence[str] = ("a", "b"),
) -> Figure:
    """The basin map of `basins` run on a grid (`grid_shape`): each start coloured by the
    attractor it reached (grey: not converged), with each attractor's fraction, energy and
    Morse index in the legend, and the basin entropy. `a`, `b`: the grid's coordinates
    (`grid_starts`' `a` along the rows, `b` along the columns, in the units of its
    `extent`), which the axes show, `a` up and `b` across (`axis_labels` name them);
    without them the axes show the grid's indices and say so. Returns the `Figure`."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    if "labels_grid" not in result:
        raise ValueError("plot_basins needs a result of basins(..., grid_shape=...).")
    labels = np.asarray(result["labels_grid"])
    attractors = result["attractors"]
    colours = ["0.75"] + [f"C{i % 10}" for i in range(len(attractors))]
    fig, axes = figure(1, 1, width=8.0, height=4.0)  # wide: the caption on one line
    ax = axes[0, 0]
    coordinates = a is not None and b is not None
    if coordinates:
        a, b = np.asarray(a, float), np.asarray(b, float)
        if (a.size, b.size) != labels.shape:
            raise ValueError(
                f"plot_basins: a and b hold {a.size} and {b.size} coordinates for a grid of "
                f"{labels.shape[0]} x {labels.shape[1]} starts."
            )
    else:  # no coordinates: the grid's indices, and the axes say so
        a, b = np.arange(labels.shape[0], dtype=float), np.arange(labels.shape[1], dtype=float)

    def edges(values):  # each cell centred on its coordinate
        step = (values[-1] - values[0]) / max(values.size - 1, 1) if values.size > 1 else 1.0
        return float(values[0] - step / 2), float(values[-1] + step / 2)

    ax.imshow(
        labels + 1,
        cmap=ListedColormap(colours),
        vmin=0,
        vmax=len(colours) - 1,
        interpolation="nearest",
        origin="lower",
        extent=(*edges(b), *edges(a)),
        aspect="auto",
    )
    ax.set_xlabel(axis_labels[1] if coordinates else f"{axis_labels[1]}: grid column (index)")
    ax.set_ylabel(axis_labels[0] if coordinates else f"{axis_labels[0]}: grid row (index)")
    handles = [
        Patch(
            color=colours[i + 1],
            label=f"{i + 1}: {att['fraction']:.0%}, E {att['energy']:.4g}, {_kind(att)}",
        )
        for i, att in enumerate(attractors)
    ]
    if result.get("not_converged"):
        handles.append(Patch(color=colours[0], label=f"not converged ({result['not_converged']})"))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        fontsize=7,
        ncols=2,
        title="attractor: basin, energy, Morse index",
        title_fontsize=7,
    )
    entropy = result.get("basin_entropy") or {}
    meta = result.get("metadata", {})
    what = f"Basins of attraction: {len(attractors)} attractors from {labels.size} starts"
    if entropy:
        what += (
            f"; basin entropy {entropy['S_b']:.3g}, on the boundary "
            f"{entropy['S_bb']:.3g} (boxes of {entropy['box']} x {entropy['box']})"
        )
    extra = [
        f"fixed-point stop RMS G {number(meta['fixed_point_atol'])}"
        if meta.get("fixed_point_atol") is not None
        else "",
        f"match tol {number(meta['match_tol'])}" if meta.get("match_tol") else "",
    ]
    title(fig, what, caption(meta, samples=f"{labels.size} starts", extra=extra))
    return finish(fig, path)


def plot_basin_continuation(
    result: Mapping[str, Any],
    path: Path | str | None = None,
    *,
    parameter_label: str | None = None,
    max_legend: int = 8,
    reference: float | None = None,
    reference_label: str = "reference",
) -> Figure:
    """The attractors of `basin_continuation` across the parameter: top, each track's
    basin fraction stacked (grey: starts that reached no fixed point); bottom, each
    track's energy, filled where it is stable, hollow where not (or unknown). The
    intervals where an attractor appears or vanishes are shaded (bottom) and their edges
    dashed (top). `p` is on a
    log axis where it is positive and spans a decade or more. `parameter_label`: the
    axis's name (default the result's parameter); at most `max_legend` tracks are
    named in the legend. Colours repeat after 10 tracks (20 where there are more than
    10). `reference`: a value of `p` marked by a dotted line in both panels and named
    `reference_label` in the legend (a model's trained value). Returns the `Figure`."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    p = np.asarray(result["p"], float)
    fractions = np.asarray(result["fractions"], float)
    tracks = result["tracks"]
    meta = result.get("metadata", {})
    name = parameter_label or str(meta.get("parameter") or "p")
    if name == "function":
        name = "p"
    palette: list[Any] = [f"C{i}" for i in range(10)]
    if len(tracks) > 10:  # twenty distinct colours before they repeat
        palette = [matplotlib.colormaps["tab20"](i) for i in range(20)]
    colours = [palette[i % len(palette)] for i in range(len(tracks))]
    fig, axes = figure(1, 2, width=8.4, height=2.5)  # wide: the caption on one line
    top, bottom = axes[0, 0], axes[1, 0]
    missing = np.clip(1.0 - fractions.sum(axis=1), 0.0, 1.0)
    top.stackplot(p, *fractions.T, missing, colors=colours + ["0.8"], linewidth=0.3)
    top.set_ylim(0, 1)
    top.set_ylabel("basin fraction")
    for track, colour in zip(tracks, colours):
        tp = np.asarray(track["p"], float)
        energy = np.asarray(track["energy"], float)
        bottom.plot(tp, energy, color=colour, linewidth=1.0)
        stable = np.array([s is True for s in track["stable"]])
        bottom.scatter(tp[stable], energy[stable], color=colour, s=14, zorder=3, clip_on=False)
        bottom.scatter(
            tp[~stable],
            energy[~stable],
            facecolors="white",
            edgecolors=colour,
            s=14,
            zorder=3,
            clip_on=False,
        )
    bottom.set_ylabel("energy E")
    bottom.set_xlabel(name)
    spans = sorted({tuple(event["between"]) for event in result["events"]})
    for lo, hi in spans:  # behind the energies; edges over the stacked fractions
        bottom.axvspan(min(lo, hi), max(lo, hi), color="0.9", zorder=0)
        for edge in (lo, hi):
            top.axvline(edge, color="0.3", linewidth=0.6, linestyle="--", zorder=3)
    for ax in (top, bottom):
        if reference is not None:
            ax.axvline(reference, color="k", linewidth=1.0, linestyle=":", zorder=4)
        if p.min() > 0 and p.max() / p.min() >= 10:
            ax.set_xscale("log")
        ax.set_xlim(p.min(), p.max())
    handles: list[Patch | Line2D] = [
        Patch(color=colour, label=f"track {track['id']}")
        for track, colour in zip(tracks[:max_legend], colours)
    ]
    if len(tracks) > max_legend:
        handles.append(Patch(color="white", label=f"and {len(tracks) - max_legend} more"))
    if missing.any():
        handles.append(Patch(color="0.8", label="no fixed point reached"))
    if spans:
        handles.append(Patch(color="0.9", label="an attractor appears or vanishes"))
    if reference is not None:
        label = f"{reference_label}, {name} = {reference:.4g}"
        handles.append(Line2D([], [], color="k", linewidth=1.0, linestyle=":", label=label))
    fig.legend(handles=handles, loc="outside lower center", fontsize=7, ncols=4)
    counts = np.asarray(result["counts"])
    kinds = [event["kind"] for event in result["events"]]
    per_value = (
        f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()} to {counts.max()}"
    )
    appear, vanish = kinds.count("appears"), kinds.count("vanishes")
    what = (
        f"Attractors across {name} from {p[0]:.4g} to {p[-1]:.4g}: {per_value} per value, "
        f"{len(tracks)} tracks ({appear} {'appears' if appear == 1 else 'appear'}, "
        f"{vanish} {'vanishes' if vanish == 1 else 'vanish'})"
    )
    extra = [
        f"{p.size} values",
        f"matched by {meta.get('match', 'distance')}",
        f"fixed-point stop RMS G {number(meta['fixed_point_atol'])}"
        if meta.get("fixed_point_atol") is not None
        else "",
    ]
    starts = np.asarray(result["labels"]).shape[1]
    title(fig, what, caption(meta, samples=f"{starts} starts", extra=extra))
    return finish(fig, path)


def plot_lyapunov_spectrum(result: Mapping[str, Any], path: Path | str | None = None) -> Figure:
    """The running estimates of each Lyapunov exponent of `lyapunov_spectrum` against the
    averaging time (how far they have converged), with the final values in the legend
    and zero marked. Returns the `Figure`."""
    fig, axes = figure(1, 1, width=6.4, height=3.6)
    ax = axes[0, 0]
    times = np.asarray(result["times"], float)
    history = np.asarray(result["history"], float)
    for i in range(history.shape[1]):
        ax.plot(
            times,
            history[:, i],
            lw=1.2,
            color=f"C{i % 10}",
            label=f"lambda_{i + 1} = {result['exponents'][i]:.4g}",
        )
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(times[0], times[-1])
    ax.set_xlabel("averaging time T (time units)")
    ax.set_ylabel("running exponent (1/time)")
    ax.legend(fontsize=7, loc="best")
    meta = result.get("metadata", {})
    measure = result.get("measure", "x")
    whole = measure == "x" and result.get("k") == result.get("size")
    what = (
        f"Lyapunov spectrum, top {history.shape[1]} by the QR method: sum "
        f"{result['volume_rate']:.4g}" + (" (the mean divergence)" if whole else "")
    )
    if result.get("neutral"):
        what += f", {result['neutral']} neutral directions by construction"
    extra = [
        f"measured in {measure}",
        f"renormalised every {number(result['renormalise'])}",
        f"transient {number(result['transient'])}",
    ]
    title(fig, what, caption(meta, horizon=f"t1 = {number(result['t1'])}", extra=extra))
    return finish(fig, path)


def _plot_by_stability(ax, p, y, stable, colour: str) -> None:
    """`y` against `p` on `ax`, solid where `stable`, dashed where not (segment `i` ends
    at point `i + 1` and takes its stability)."""
    for start, stop, solid in _runs(stable[1:]):
        ax.plot(
            p[start : stop + 1], y[start : stop + 1], "-" if solid else "--", color=colour, lw=1.4
        )


CODIM2_MARKERS = {"cusp": ("^", "tab:red")}
CODIM2_NAMES = {"cusp": "cusp"}


def _codim2_coefficients(point: Mapping[str, Any]) -> str:
    """What a codimension-two point's label says of its normal form."""
    if not point.get("located", True):
        return "not located"
    return f"c = {number(point['c'])}"


def plot_parameter_plane(
    result: Branches,
    path: Path | str | None = None,
    *,
    labels: Sequence[str] | None = None,
    names: tuple[str, str] = ("p", "q"),
) -> Figure:
    """Curves of `fold_continuation` (one, or a list): left, the curves in the parameter
    plane (`q` across, `p` up), each cusp marked and named with its normal-form
    coefficient; right, each curve's cusp test function against its arclength (a
    symmetric log scale where it spans decades). `labels`: a name per curve; `names`:
    what `p` and `q` are (the axes' labels). Returns the `Figure`."""
    curves = list(result) if isinstance(result, (list, tuple)) else [result]
    labels = labels or [f"fold curve {i + 1}" for i in range(len(curves))]
    if len(labels) != len(curves):
        raise ValueError(f"labels: one per curve ({len(curves)}), got {len(labels)}.")
    fig, axes = figure(2, 1, height=3.4)
    found, largest = [], 0.0
    for index, (curve, label) in enumerate(zip(curves, labels)):
        colour = f"C{index}"
        q, p = np.asarray(curve["q"], float), np.asarray(curve["p"], float)
        axes[0, 0].plot(q, p, "-", color=colour, label=label)
        s = np.asarray(curve["s"], float)
        values = np.asarray(curve["tests"], float)[:, 0]
        axes[0, 1].plot(s, values, "-", color=colour, label=f"{label}: cusp test")
        if np.any(np.isfinite(values)):
            largest = max(largest, float(np.nanmax(np.abs(values))))
        # a coordinate zero to rounding is shown as 0, not as 1e-34
        scale = max(1.0, float(np.max(np.abs(p))), float(np.max(np.abs(q))))
        for point in curve["codim2"]:
            marker, colour_c = CODIM2_MARKERS[point["kind"]]
            axes[0, 0].plot([point["q"]], [point["p"]], marker, color=colour_c, ms=8, zorder=5)
            at_q, at_p = (v if abs(v) > 1e-12 * scale else 0.0 for v in (point["q"], point["p"]))
            found.append(
                f"{CODIM2_NAMES[point['kind']]} at {names[1]} = {number(at_q)}, "
                f"{names[0]} = {number(at_p)} ({_codim2_coefficients(point)})"
            )
    for kind, (marker, colour_c) in CODIM2_MARKERS.items():
        if any(point["kind"] == kind for curve in curves for point in curve["codim2"]):
            axes[0, 0].plot([], [], marker, color=colour_c, label=CODIM2_NAMES[kind])
    axes[0, 0].set_xlabel(f"second parameter {names[1]}")
    axes[0, 0].set_ylabel(f"parameter {names[0]}")
    axes[0, 0].set_title("folds in the parameter plane", fontsize=9)
    axes[0, 0].legend(fontsize=7, loc="best")
    axes[0, 1].axhline(0.0, color="0.5", lw=0.8)
    if largest > 20.0:
        axes[0, 1].set_yscale("symlog", linthresh=1.0)
    axes[0, 1].set_xlabel("arclength along the curve")
    axes[0, 1].set_ylabel("test function")
    axes[0, 1].set_title("each zero a cusp", fontsize=9)
    axes[0, 1].legend(fontsize=7, loc="best")
    for ax in axes[0]:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    found = list(dict.fromkeys(found))  # a cusp that several curves find, named once
    what = "Folds followed in two parameters: " + (
        "; ".join(found) if found else "no cusp on the curves"
    )
    title(fig, what, _branches_caption(curves))
    return finish(fig, path)


def _branches_caption(branches: list[Mapping[str, Any]]) -> str:
    """The caption of a figure of branches: the first one's metadata, then how many
    points in all, why each stopped and Newton's tolerance."""
    meta = branches[0].get("metadata", {})
    stops = ", ".join(str(b["stop_reason"]) for b in branches)
    extra = [
        f"{sum(len(b['s']) for b in branches)} points",
        f"stopped: {stops}",
        f"Newton tol {number(meta['tol'])}" if meta.get("tol") is not None else "",
    ]
    return caption(meta, extra=[e for e in extra if e])
