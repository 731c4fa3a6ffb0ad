"""Figures without global state: `matplotlib.figure.Figure` objects rendered with the Agg
canvas, never pyplot (so plotting works headless and leaves no open windows).

Every figure says what it shows: `title` writes a title line and a caption line (model,
horizon, dtype, sample count, solver and tolerances, from the result's `metadata`:
`caption`). `finish` gives every log axis readable ticks (`tidy_log_axes`) before it
saves, in the format of the path's suffix (png, pdf, svg). `layout_problems` lists
overlapping or clipped text from matplotlib's own text extents: the tests require it
to be empty for every figure the package draws."""

import itertools
import math
from pathlib import Path

import numpy as np
from matplotlib import rc_context, ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

from et_ode.records import atomic_path

FIGURE_FORMATS = ("png", "pdf", "svg")  # what `write_figure` and --format write
TITLE_SIZE = 8.5
SEPARATOR = " \u00b7 "  # a middle dot between the parts of a caption
_TEXT_PATH = TextToPath()  # measures text for `wrap`

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


def wrap(fig: Figure, text: str, fontsize: float, width_fraction: float = 0.94) -> str:
    """`text` broken into lines that fit `width_fraction` of the figure's width at
    `fontsize` (existing line breaks kept; a line breaks at spaces)."""
    width_pt = fig.get_figwidth() * 72 * width_fraction
    font = FontProperties(size=fontsize)

    def width(line):  # in points, as the font draws it
        return _TEXT_PATH.get_text_width_height_descent(line, font, ismath=False)[0]

    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            trial = f"{line} {word}" if line else word
            if line and width(trial) > width_pt:
                lines.append(line)
                line = word
            else:
                line = trial
        lines.append(line)
    return "\n".join(lines)


def title(fig: Figure, what: str, caption_text: str = "") -> None:
    """The figure's title, `what` it shows, and under it its caption line, as one
    `fig.suptitle` wrapped to the figure's width (constrained layout makes room for a
    suptitle, and a legend placed "outside lower center" or at the right stays clear of
    it; a second figure-level text would not be laid out with such a legend)."""
    text = wrap(fig, what, TITLE_SIZE)
    if caption_text:
        text += "\n" + wrap(fig, caption_text, TITLE_SIZE)
    fig.suptitle(text, fontsize=TITLE_SIZE)


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


def label_points(ax, xs, ys, labels, *, fontsize: float = 6.5, color=None, renderer=None) -> int:
    """Write `labels[i]` beside the point `(xs[i], ys[i])` of `ax` (e.g. the tolerance of
    each point of a work-precision line), each at the first of eight places around its
    point where it overlaps no other text, no other labelled point and stays inside the
    axes. The figure is drawn first (its layout fixed: call this after everything else
    is plotted; `renderer`: that of a figure already drawn so, `renderer_of`, to label
    several sets of points after one drawing); the labels take no part in the layout.

    **Returns:** the number of labels left out because no place was free (0 normally;
    say so in the figure when it is not)."""
    fig = ax.figure
    if renderer is None:
        tidy_log_axes(fig)
        renderer = renderer_of(fig)
    frame = ax.get_window_extent(renderer)
    taken = [text.get_window_extent(renderer) for _, _, text, _ in _texts(fig)]
    points = ax.transData.transform(np.column_stack([np.asarray(xs, float), np.asarray(ys, float)]))
    marks = [(px - 3, py - 3, px + 3, py + 3) for px, py in points if np.isfinite([px, py]).all()]
    places = (
        (4, 2, "left", "bottom"),
        (4, -2, "left", "top"),
        (-4, 2, "right", "bottom"),
        (-4, -2, "right", "top"),
        (0, 5, "center", "bottom"),
        (0, -5, "center", "top"),
        (6, 0, "left", "center"),
        (-6, 0, "right", "center"),
    )
    left_out = 0
    for (px, py), (x, y), label in zip(points, zip(xs, ys), labels):
        if not (np.isfinite([px, py]).all() and frame.contains(px, py)):
            continue
        for dx, dy, ha, va in places:
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
            own = (px - 3, py - 3, px + 3, py + 3)
            if (
                inside
                and not any(_boxes_overlap(box.extents, other.extents) for other in taken)
                and not any(_boxes_overlap(box.extents, mark) for mark in marks if mark != own)
            ):
                taken.append(box)
                break
            text.remove()
        else:
            left_out += 1
    return left_out


# --------------------------------------------------------------------- layout checks


def renderer_of(fig: Figure):
    """Draw `fig` (giving it an Agg canvas if it has none) and return the renderer, with
    which every artist's extent in pixels is final."""
    canvas = fig.canvas
    if not hasattr(canvas, "get_renderer"):
        canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _axes_name(ax, index: int) -> str:
    label = ax.get_title() or ax.get_ylabel() or ax.get_label() or ""
    label = " ".join(label.split())
    return f"axes {index}" + (f" ({label[:40]})" if label else "")


def _texts(fig: Figure):
    """`(owner, kind, Text, axes)` for every visible, non-empty text that `fig` draws:
    per axes the tick labels in view, axis labels, offset texts, titles, texts and
    annotations, legend entries and titles; the figure's texts, suptitle, supxlabel,
    supylabel and legends. The owner names the axes (or "figure"; a legend's entries are
    owned by the legend); `axes` is the axes drawing it (None for the figure's)."""
    items = []

    seen = set()

    def add(owner, kind, artist, ax):
        if (
            artist is not None
            and id(artist) not in seen
            and artist.get_visible()
            and artist.get_text().strip()
        ):
            seen.add(id(artist))
            items.append((owner, kind, artist, ax))

    def add_legend(owner, legend, ax):
        if legend is None or not legend.get_visible():
            return
        for text in legend.get_texts():
            add(f"{owner} legend", "legend entry", text, ax)
        add(f"{owner} legend", "legend title", legend.get_title(), ax)

    for index, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        owner = _axes_name(ax, index)
        if ax.axison:
            for letter, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                if not axis.get_visible():
                    continue
                # the ticks in view, those drawn (private: matplotlib's stubs omit it)
                for tick in axis._update_ticks():  # type: ignore[union-attr]
                    if tick.get_visible():
                        add(owner, f"{letter} tick label", tick.label1, ax)
                        add(owner, f"{letter} tick label", tick.label2, ax)
                add(owner, f"{letter} axis label", axis.label, ax)
                add(owner, f"{letter} offset text", axis.get_offset_text(), ax)
        # the left and right titles have no public accessor (nor a place in the stubs)
        for text in (ax.title, ax._left_title, ax._right_title):  # type: ignore[attr-defined]
            add(owner, "title", text, ax)
        for text in ax.texts:
            add(owner, "text", text, ax)
        add_legend(owner, ax.get_legend(), ax)
    for kind in ("suptitle", "supxlabel", "supylabel"):
        add("figure", kind, getattr(fig, f"_{kind}", None), None)
    for text in fig.texts:
        add("figure", "text", text, None)
    for legend in fig.legends:
        add_legend("figure", legend, None)
    return items


def _rectangle(text, renderer):
    """`(centre x, centre y, half width, half height, angle in radians)` of the rotated
    rectangle a text occupies, in pixels (its extent is the bounding box of that
    rectangle, with the same centre)."""
    box = text.get_window_extent(renderer)
    angle = math.radians(text.get_rotation() % 180.0)
    if abs(math.sin(2 * angle)) < 1e-9:  # 0 or 90 degrees: the box is the rectangle
        return (*box.p0 + (box.size / 2), box.width / 2, box.height / 2, 0.0)
    rotation = text.get_rotation()
    try:
        text.set_rotation(0.0)
        flat = text.get_window_extent(renderer)
    finally:
        text.set_rotation(rotation)
    return (*box.p0 + (box.size / 2), flat.width / 2, flat.height / 2, angle)


def _overlap(a, b, tolerance: float = 0.5) -> bool:
    """Whether two rotated rectangles (`_rectangle`) overlap by more than `tolerance`
    pixels along every separating direction (the separating axis test)."""
    centre = np.array([b[0] - a[0], b[1] - a[1]])
    axes = []
    for rect in (a, b):
        c, s = math.cos(rect[4]), math.sin(rect[4])
        axes += [np.array([c, s]), np.array([-s, c])]
    for direction in axes:

        def reach(rect):
            c, s = math.cos(rect[4]), math.sin(rect[4])
            u, v = np.array([c, s]), np.array([-s, c])
            return rect[2] * abs(direction @ u) + rect[3] * abs(direction @ v)

        if abs(centre @ direction) >= reach(a) + reach(b) - tolerance:
            return False
    return True


def _boxes_overlap(a, b, tolerance: float = 0.5) -> bool:
    """Whether two boxes `(x0, y0, x1, y1)` overlap by more than `tolerance` pixels."""
    return bool(
        min(a[2], b[2]) - max(a[0], b[0]) > tolerance
        and min(a[3], b[3]) - max(a[1], b[1]) > tolerance
    )


def _shown(text) -> str:
    words = " ".join(text.get_text().split())
    return repr(words if len(words) <= 40 else words[:37] + "...")


def layout_problems(fig: Figure, *, tolerance: float = 0.5) -> list[str]:
    """Overlapping and clipped text in `fig`, from matplotlib's own extents: draw it
    (Agg), then for every visible text (`_texts`: tick labels in view, axis labels,
    titles, texts, annotations, legends, suptitle and other figure texts) report

    - any part of it outside the figure's canvas (it would be cut off);
    - a text clipped by its clip box (a label cut at the axes' edge);
    - two texts that overlap (tick labels of one axis, or any two texts at all: a legend's
      entries with another axes' labels, a title with a neighbour's tick labels), rotated
      texts by their rotated rectangles;
    - a legend's frame over a text that is not its own;
    - a text over another axes' plotting area (not its twin's).

    `tolerance`: pixels of overlap ignored (touching boxes). **Returns:** one sentence per
    problem (an empty list for a clean figure)."""
    renderer = renderer_of(fig)
    canvas = fig.bbox
    items = _texts(fig)
    problems = []
    boxes = [text.get_window_extent(renderer) for _, _, text, _ in items]
    for (owner, kind, text, _), box in zip(items, boxes):
        if (
            box.x0 < canvas.x0 - tolerance
            or box.y0 < canvas.y0 - tolerance
            or box.x1 > canvas.x1 + tolerance
            or box.y1 > canvas.y1 + tolerance
        ):
            problems.append(
                f"{owner}: {kind} {_shown(text)} extends outside the canvas "
                f"({box.x0:.0f}..{box.x1:.0f} x {box.y0:.0f}..{box.y1:.0f} px; "
                f"canvas {canvas.width:.0f} x {canvas.height:.0f})"
            )
        clip = text.get_clip_box() if text.get_clip_on() else None
        if clip is not None and not (
            box.x0 >= clip.x0 - tolerance
            and box.x1 <= clip.x1 + tolerance
            and box.y0 >= clip.y0 - tolerance
            and box.y1 <= clip.y1 + tolerance
        ):
            problems.append(f"{owner}: {kind} {_shown(text)} is clipped by its axes")
    rectangles = [_rectangle(text, renderer) for _, _, text, _ in items]
    for (i, (owner_a, kind_a, a, _)), (j, (owner_b, kind_b, b, _)) in itertools.combinations(
        enumerate(items), 2
    ):
        if not _boxes_overlap(boxes[i].extents, boxes[j].extents, tolerance):
            continue  # the bounding boxes hold the rotated rectangles
        if _overlap(rectangles[i], rectangles[j], tolerance):
            where = owner_a if owner_a == owner_b else f"{owner_a} / {owner_b}"
            problems.append(f"{where}: {kind_a} {_shown(a)} overlaps {kind_b} {_shown(b)}")
    legends = [
        (f"{_axes_name(ax, i)} legend", ax.get_legend()) for i, ax in enumerate(fig.axes)
    ] + [("figure legend", leg) for leg in fig.legends]
    for name, legend in legends:
        if legend is None or not legend.get_visible():
            continue
        frame = legend.get_window_extent(renderer)
        if (
            frame.x0 < canvas.x0 - tolerance
            or frame.y0 < canvas.y0 - tolerance
            or frame.x1 > canvas.x1 + tolerance
            or frame.y1 > canvas.y1 + tolerance
        ):
            problems.append(f"{name} extends outside the canvas")
        for (owner, kind, text, _), box in zip(items, boxes):
            if owner != name and _boxes_overlap(frame.extents, box.extents, tolerance):
                problems.append(f"{name} covers {owner}: {kind} {_shown(text)}")
    panels = [
        (ax, _axes_name(ax, i), ax.get_window_extent(renderer))
        for i, ax in enumerate(fig.axes)
        if ax.get_visible() and ax.axison
    ]
    for (owner, kind, text, own), box in zip(items, boxes):
        for ax, name, panel in panels:
            if own is ax:
                continue
            if own is not None and np.allclose(
                own.get_position().extents, ax.get_position().extents
            ):
                continue  # a twin: the same panel
            if _boxes_overlap(panel.extents, box.extents, tolerance):
                problems.append(
                    f"{owner}: {kind} {_shown(text)} lies over the plotting area of {name}"
                )
    return problems
