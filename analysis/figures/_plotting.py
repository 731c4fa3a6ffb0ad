"""Figures without global state: `matplotlib.figure.Figure` objects rendered with the Agg
canvas, never pyplot (so plotting works headless and leaves no open windows).

Every figure says what it shows: `title` writes a heading line and a caption line (model,
horizon, dtype, sample count, solver and tolerances, from the result's `metadata`:
`caption`), each on one line of the figure's width (the rule `layout_problems` checks:
at most `TITLE_LINES` lines). `finish` gives every log axis readable ticks
(`tidy_log_axes`) before it saves, in the format of the path's suffix (png, pdf, svg).
`label_points` writes a label beside each point of a series, clear of other text and of
the lines of other colours. `layout_problems` (`_layout`) lists overlapping or clipped
text, text over a line it does not label, and titles over two lines, from matplotlib's
own text extents: the tests require it to be empty for every figure the package
draws."""

import itertools
import math
from pathlib import Path

import numpy as np
from matplotlib import rc_context, ticker
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

from et_ode.records import atomic_path

from ._layout import TITLE_LINES as TITLE_LINES
from ._layout import (
    _boxes_overlap,
    _rectangle,
    _texts,
    line_shapes,
    lines_under,
    same_colour,
    text_width,
    title_gid,
)
from ._layout import layout_problems as layout_problems
from ._layout import renderer_of as renderer_of

FIGURE_FORMATS = ("png", "pdf", "svg")  # what `write_figure` and --format write
TITLE_SIZE = 8.5  # the title's font size where its lines fit
MIN_TITLE_SIZE = 7.0  # the smallest it is shrunk to, to keep each part on one line
TITLE_WIDTH = 0.94  # the fraction of the figure's width a title line may take
SEPARATOR = " \u00b7 "  # a middle dot between the parts of a caption

FLOW_COLOURS = {"native": "tab:blue", "projected": "tab:orange"}


def figure(ncols: int = 1, nrows: int = 1, *, width: float = 4.2, height: float = 3.2):
    """A constrained-layout `Figure` and its `[nrows, ncols]` array of axes."""
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def finish(fig: Figure, path: Path | str | None = None, *, dpi: int = 120) -> Figure:
    """Give every log axis of `fig` readable ticks (`tidy_log_axes`), then save it to
    `path` when given, atomically (never a half-written figure under its name), in the
    format of the suffix (`.png`, `.pdf`, `.svg`: `write_figure`); return the figure."""
    tidy_log_axes(fig)
    if path is not None:
        write_figure(path, fig, dpi=dpi)
    return fig


def write_figure(path: Path | str, fig: Figure, *, dpi: float | None = None) -> Path:
    """Write the matplotlib figure `fig` to `path` atomically (folder created), in the
    format its suffix names: `.png` (pixels at `dpi`, default the figure's own), `.pdf` or
    `.svg` (vector graphics; the PDF's fonts embedded as TrueType, Type 42, which journals
    ask for, not Type 3); `FIGURE_FORMATS`. Returns the path."""
    path = Path(path)
    kind = path.suffix.lstrip(".").lower()
    if kind not in FIGURE_FORMATS:
        raise ValueError(
            f"cannot write a figure as {path.name!r}: the suffix must be one "
            f"of {', '.join('.' + f for f in FIGURE_FORMATS)}."
        )
    with atomic_path(path) as temporary, rc_context({"pdf.fonttype": 42}):
        fig.savefig(temporary, dpi=dpi or "figure", format=kind)
    return path


def positive(values):
    """`values` with non-positive and non-finite entries masked (for log axes)."""
    values = np.asarray(values, float)
    return np.where(np.isfinite(values) & (values > 0), values, np.nan)


def batch_median(values):
    """Median over a leading batch axis when `values` has one more axis than a trace."""
    values = np.asarray(values, float)
    return np.nanmedian(values, axis=0) if values.ndim > 1 else values


# ------------------------------------------------------------------ titles and captions


def number(value) -> str:
    """A number as a caption shows it: `%g`, four significant digits."""
    return f"{float(value):.4g}"


def solver_text(options: dict | None) -> str:
    """`"tsit5 rtol 1e-05, atol 1e-07"` or `"euler dt0 0.1"` from solve options (`solver`,
    `rtol`, `atol`, `dt0`; a solver per flow, `{"native": "tsit5", ...}`, is shown as
    `"native tsit5, projected auto"`); empty without a solver."""
    options = options or {}
    solver = options.get("solver")
    if not solver:
        return ""
    if isinstance(solver, dict):
        solver = ", ".join(f"{flow} {name}" for flow, name in solver.items())
    if options.get("rtol") is not None:
        text = f"{solver} rtol {options['rtol']:g}"
        if options.get("atol") is not None:
            text += f", atol {options['atol']:g}"
        return text
    if options.get("dt0") is not None:
        return f"{solver} dt0 {options['dt0']:g}"
    return str(solver)


def model_name(meta: dict) -> str | None:
    """The model a result is of, as its metadata records it: a job's `checkpoint` (a
    shipped name or a file), else a `model` entry that is a name, else None."""
    for key in ("checkpoint", "model", "study_model"):
        value = meta.get(key)
        if isinstance(value, dict):
            value = value.get("name")
        if isinstance(value, str) and value:
            return Path(value).name if ("/" in value or "\\" in value) else value
    return None


def samples_text(meta: dict | None, count: int, noun: str = "samples") -> str:
    """`"4 images"` for a job on held-out images or photos (its metadata has `data`),
    else `"4 samples"` (or `noun`); singular for one."""
    meta = meta or {}
    if isinstance(meta.get("data"), dict):
        noun = "images"
    count = int(count)
    return f"{count} {noun[:-1] if count == 1 and noun.endswith('s') else noun}"


def caption(
    meta: dict | None, *, samples=None, horizon=None, flow=None, solver=None, dtype=None, extra=()
) -> str:
    """The caption line of a figure: what produced the numbers, from a result's `metadata`
    (`meta`), each part overridable.

    Parts, in order, each left out when unknown: the model (`model_name`), the sample
    count (`samples`: a number, then a noun, e.g. `(2, "images")`, or a string), the flow
    (`flow`, else `meta["flow"]` or `meta["flows"]`), the horizon (`horizon`: a string
    such as `"t1 = 1.2 tau"`, or a number, shown as `t1 = ... tau`; else `meta["t1"]`), the
    dtype (`dtype`, else `meta["dtype"]`), the solver and tolerances (`solver`: a string or
    a dict of solve options, see `solver_text`; else from `meta`'s `solver`, `rtol`,
    `atol`, `dt0`), then `extra` (strings). Joined by middle dots."""
    meta = meta or {}
    parts = []
    name = model_name(meta)
    if name:
        parts.append(f"model {name}")
    if samples is not None:
        if isinstance(samples, tuple):
            count, noun = samples
            parts.append(f"{count} {noun}")
        else:
            parts.append(str(samples))
    flow = flow if flow is not None else meta.get("flow") or meta.get("flows")
    if isinstance(flow, (list, tuple)):
        flow = " and ".join(map(str, flow)) + (" flows" if len(flow) > 1 else " flow")
    elif flow:
        flow = f"{flow} flow"
    if flow:
        parts.append(flow)
    horizon = horizon if horizon is not None else meta.get("t1")
    if horizon is not None:
        parts.append(horizon if isinstance(horizon, str) else f"t1 = {number(horizon)} tau")
    dtype = dtype or meta.get("dtype")
    if dtype:
        parts.append(str(dtype))
    if solver is None:
        solver = {k: meta.get(k) for k in ("solver", "rtol", "atol", "dt0")}
    text = solver if isinstance(solver, str) else solver_text(solver)
    if text:
        parts.append(text)
    parts.extend(str(item) for item in extra if item)
    return SEPARATOR.join(parts)


def wrap(fig: Figure, text: str, fontsize: float, width_fraction: float = TITLE_WIDTH) -> str:
    """`text` broken at spaces into lines that fit `width_fraction` of the figure's width
    at `fontsize` (existing line breaks kept), balanced: as few lines as a greedy fill
    needs, each as nearly the same width as the words allow, so that no paragraph ends in
    a short orphan line."""
    width_pt = fig.get_figwidth() * 72 * width_fraction

    def fill(paragraph: str, limit: float) -> list[str]:
        lines, line = [], ""
        for word in paragraph.split(" "):
            trial = f"{line} {word}" if line else word
            if line and text_width(trial, fontsize) > limit:
                lines.append(line)
                line = word
            else:
                line = trial
        return lines + [line]

    out = []
    for paragraph in text.split("\n"):
        lines = fill(paragraph, width_pt)
        if len(lines) > 1:  # the narrowest width that keeps that many lines
            low = max(text_width(word, fontsize) for word in paragraph.split(" "))
            high = width_pt
            for _ in range(20):
                middle = 0.5 * (low + high)
                low, high = (
                    (low, middle) if len(fill(paragraph, middle)) <= len(lines) else (middle, high)
                )
            lines = fill(paragraph, high)
        out += lines
    return "\n".join(out)


def title_text(
    fig: Figure, what: str, caption_text: str = "", size: float | None = None
) -> tuple[str, float, str]:
    """What `title` writes: `(text, font size, gid)`. With a caption, the heading `what`
    takes the first line and the caption the second, at `TITLE_SIZE` or, where either is
    wider than the figure (`TITLE_WIDTH`), at the largest size down to `MIN_TITLE_SIZE`
    at which both fit; a heading alone may take two lines. A part still too wide is
    broken into balanced lines (`wrap`), and `layout_problems` reports the title (more
    than `TITLE_LINES` lines): shorten the heading or the caption. The gid records the
    lines of each part (`title_gid`). `size`: that font size instead (a video's frames
    keep one)."""
    parts = [part for part in (what, caption_text) if part]
    limit = fig.get_figwidth() * 72 * TITLE_WIDTH
    fixed, size = size is not None, size or TITLE_SIZE
    while (
        not fixed
        and len(parts) > 1
        and size > MIN_TITLE_SIZE
        and any(text_width(part, size) > limit for part in parts)
    ):
        size = max(MIN_TITLE_SIZE, size - 0.25)
    wrapped = [wrap(fig, part, size) for part in parts]
    return "\n".join(wrapped), size, title_gid(*(part.count("\n") + 1 for part in wrapped))


def nothing_to_show(ax, text: str) -> None:
    """Say in words, in the middle of `ax`, what its panel would show and why it has
    nothing to (a panel left empty reads as a failed drawing)."""
    ax.text(
        0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.3"
    )


def title(fig: Figure, what: str, caption_text: str = "") -> None:
    """The figure's title, `what` it shows, and under it its caption line, as one
    `fig.suptitle` (`title_text`: a heading line and a caption line, the font shrunk
    where needed; constrained layout makes room for a suptitle, and a legend placed
    "outside lower center" or at the right stays clear of it; a second figure-level text
    would not be laid out with such a legend)."""
    text, size, gid = title_text(fig, what, caption_text)
    fig.suptitle(text, fontsize=size).set_gid(gid)


# -------------------------------------------------------------------------- log axes


def _tick_label(value, _position=None) -> str:
    """`0.02`, `30`, `1500` plainly; `3x10^-5` (mathtext) outside [1e-3, 1e4)."""
    if not np.isfinite(value) or value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)) + 1e-9)
    if -3 <= exponent < 4:
        return f"{value:.3g}"
    mantissa = value / 10.0**exponent
    if abs(mantissa - round(mantissa)) < 1e-6:
        mantissa_text = f"{round(mantissa):d}"
    else:
        mantissa_text = f"{mantissa:.2g}"
    if mantissa_text == "1":
        return f"$10^{{{exponent}}}$"
    return f"${mantissa_text}\\times10^{{{exponent}}}$"


def _log_ticks(low: float, high: float) -> list[float]:
    """At least two readable tick values in `[low, high]` (0 < low < high): the powers
    of ten when two fit, else 1-2-5 multiples, else every integer multiple of a power of
    ten, else plain linear steps."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for mantissas in ((1,), (1, 2, 5), tuple(range(1, 10))):
        values = [m * 10.0**e for e in range(first, last + 1) for m in mantissas]
        inside = [v for v in values if low * (1 - 1e-9) <= v <= high * (1 + 1e-9)]
        if len(inside) >= 2:
            return inside
    linear = ticker.MaxNLocator(nbins=3, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high)
    return [float(v) for v in linear if low <= v <= high]


def tidy_log_axes(fig: Figure) -> None:
    """Readable ticks on every log axis of `fig`: no labels on minor ticks (matplotlib
    labels some when an axis spans less than a decade, where `3x10^1` and `4x10^1`
    collide), and where fewer than two powers of ten are in view, labelled ticks at 1-2-5
    multiples (or finer) instead, so every log axis shows at least two numbers. Called by
    `finish`; the axes' limits must be final."""
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim), (ax.yaxis, ax.get_ylim)):
            if axis.get_scale() != "log":
                continue
            low, high = sorted(limits())
            if not (np.isfinite(low) and np.isfinite(high) and 0 < low < high):
                continue
            axis.set_minor_formatter(ticker.NullFormatter())
            values = _log_ticks(low, high)
            if len(values) >= 2 and not _powers_of_ten(values):
                if axis is ax.xaxis:
                    values = _spaced(values, low, high, ax, fig)
                axis.set_major_locator(ticker.FixedLocator(values))
                axis.set_major_formatter(ticker.FuncFormatter(_tick_label))


def _spaced(values: list[float], low: float, high: float, ax, fig: Figure) -> list[float]:
    """Every `step`-th of the log x axis' tick `values` (first and last always kept), the
    smallest step at which neighbouring labels, as wide as their text at the tick font
    size, keep a gap between them on the axis' length (where integer multiples of a
    power of ten crowd a narrow axis: `0.07`, `0.08`, `0.09`)."""
    font = FontProperties(size=ax.xaxis.get_major_ticks()[0].label1.get_fontsize())
    size = font.get_size_in_points()
    length = ax.get_position().width * fig.get_size_inches()[0] * 72.0  # points
    span = math.log10(high) - math.log10(low)
    where = lambda v: (math.log10(v) - math.log10(low)) / span * length  # noqa: E731
    width = lambda v: 0.6 * size * len(_tick_label(v).replace("$", ""))  # noqa: E731
    for step in range(1, len(values)):
        kept = values[::step]
        if kept[-1] != values[-1]:
            kept = kept[:-1] + [values[-1]] if len(kept) > 1 else [values[0], values[-1]]
        gaps = [
            where(b) - where(a) - 0.5 * (width(a) + width(b)) for a, b in itertools.pairwise(kept)
        ]
        if min(gaps) >= size:
            return kept
    return [values[0], values[-1]]


def _powers_of_ten(values) -> bool:
    return all(abs(math.log10(v) - round(math.log10(v))) < 1e-9 for v in values)


# -------------------------------------------------------------- labels on data points


# Where `label_points` tries a label, in order: offsets from the point (points) and the
# alignment of the text there; the first ring beside the point, the others further out.
LABEL_PLACES = (
    (4, 2, "left", "bottom"),
    (4, -2, "left", "top"),
    (-4, 2, "right", "bottom"),
    (-4, -2, "right", "top"),
    (0, 5, "center", "bottom"),
    (0, -5, "center", "top"),
    (6, 0, "left", "center"),
    (-6, 0, "right", "center"),
    (7, 7, "left", "bottom"),
    (7, -7, "left", "top"),
    (-7, 7, "right", "bottom"),
    (-7, -7, "right", "top"),
    (0, 11, "center", "bottom"),
    (0, -11, "center", "top"),
    (11, 0, "left", "center"),
    (-11, 0, "right", "center"),
    (11, 12, "left", "bottom"),
    (11, -12, "left", "top"),
    (-11, 12, "right", "bottom"),
    (-11, -12, "right", "top"),
)


def label_points(ax, xs, ys, labels, *, fontsize: float = 6.5, color=None, renderer=None) -> int:
    """Write `labels[i]` beside the point `(xs[i], ys[i])` of `ax` (e.g. the tolerance of
    each point of a work-precision line), in `color` (that of the points' series: a label
    labels the lines of its own colour, `layout_problems`), each at the first of the
    `LABEL_PLACES` around its point where it stays inside the axes and overlaps no other
    text, no other labelled point and no line or marker at all; failing that, at the
    first where it crosses only lines of its own colour (its own series). The figure is
    drawn first (its layout fixed: call this after everything else is plotted;
    `renderer`: that of a figure already drawn so, `renderer_of`, to label several sets
    of points after one drawing); the labels take no part in the layout.

    **Returns:** the number of labels left out because no place was free (0 normally;
    say so in the figure when it is not)."""
    fig = ax.figure
    if renderer is None:
        tidy_log_axes(fig)
        renderer = renderer_of(fig)
    frame = ax.get_window_extent(renderer)
    taken = [text.get_window_extent(renderer) for _, _, text, _ in _texts(fig)]
    shapes = line_shapes(ax)
    points = ax.transData.transform(np.column_stack([np.asarray(xs, float), np.asarray(ys, float)]))
    marks = [(px - 3, py - 3, px + 3, py + 3) for px, py in points if np.isfinite([px, py]).all()]
    left_out = 0
    for (px, py), (x, y), label in zip(points, zip(xs, ys), labels):
        if not (np.isfinite([px, py]).all() and frame.contains(px, py)):
            continue
        own = (px - 3, py - 3, px + 3, py + 3)
        chosen = fallback = None
        for dx, dy, ha, va in LABEL_PLACES:
            text = ax.annotate(
                label,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va=va,
                fontsize=fontsize,
                color=color,
            )
            text.set_in_layout(False)
            box = text.get_window_extent(renderer)
            inside = (
                box.x0 >= frame.x0
                and box.x1 <= frame.x1
                and box.y0 >= frame.y0
                and box.y1 <= frame.y1
            )
            free = (
                inside
                and not any(_boxes_overlap(box.extents, other.extents) for other in taken)
                and not any(_boxes_overlap(box.extents, mark) for mark in marks if mark != own)
            )
            under = lines_under(_rectangle(text, renderer), shapes) if free else []
            if free and not under:
                chosen = text
                break
            if (
                free
                and fallback is None
                and all(any(same_colour(text.get_color(), c) for c in s["colours"]) for s in under)
            ):
                fallback = text
                continue
            text.remove()
        if chosen is not None and fallback is not None:
            fallback.remove()
        chosen = chosen or fallback
        if chosen is None:
            left_out += 1
        else:
            taken.append(chosen.get_window_extent(renderer))
    return left_out
