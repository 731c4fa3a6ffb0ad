"""The layout check of a figure, `layout_problems`, and what it measures with: the texts a
figure draws (`_texts`), their rotated rectangles, the lines each axes draws in pixels
(`line_shapes`) and the rule for titles (`TITLE_LINES`). From matplotlib's own extents
after one drawing (`renderer_of`); imports nothing else of the figures room.

The rules, each a sentence of `layout_problems`:

- no text outside the canvas, none clipped by its axes, no two texts overlapping (tick
  labels, axis labels, titles, legend entries, point labels and annotations alike), no
  legend frame over another's text, no text over another axes' plotting area;
- **a text in an axes (a point label, an annotation) lies over no line of another
  colour**: a text labels the lines drawn in its own colour (`label_points` writes each
  series' labels in its colour; an annotation of a reference line takes the line's
  colour), and a line of any other colour under it (a reference line such as the
  work-precision figure's dotted `axhline`, another series' line or markers) makes it
  hard to read;
- **the suptitle has at most `TITLE_LINES` (2) lines**, the heading on one and the
  caption on the other (`title` writes them so, shrinking the font and shortening
  nothing a figure shows), and no part of it broken across lines ends in an orphan: a
  last line narrower than `ORPHAN_FRACTION` of the widest line of its part. `title`
  records in the suptitle's `gid` how many lines each part took; any other suptitle is
  one part."""

import itertools
import math

import numpy as np
from matplotlib import cbook
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

TITLE_LINES = 2  # the most lines a suptitle may take: a heading line and a caption line
ORPHAN_FRACTION = 1 / 3  # a part's last line narrower than this of its widest: an orphan
TITLE_GID = "et-ode-title"  # `title`'s mark on a suptitle: "et-ode-title <lines per part>"
_TEXT_PATH = TextToPath()


def _none(value) -> bool:
    """Whether a line style, marker or colour of matplotlib's means nothing drawn."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none"))


def text_width(line: str, fontsize: float) -> float:
    """The width in points of one line of plain text at `fontsize` (the default font), as
    matplotlib draws it."""
    font = FontProperties(size=fontsize)
    return _TEXT_PATH.get_text_width_height_descent(line, font, ismath=False)[0]


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


# ------------------------------------------------------------------------ lines


def _clip(segment, box):
    """The part of `segment` `(x0, y0, x1, y1)` inside `box` `(x0, y0, x1, y1)`, or None
    (Liang-Barsky)."""
    x0, y0, x1, y1 = segment
    dx, dy = x1 - x0, y1 - y0
    low, high = 0.0, 1.0
    for p, q in ((-dx, x0 - box[0]), (dx, box[2] - x0), (-dy, y0 - box[1]), (dy, box[3] - y0)):
        if p == 0:
            if q < 0:
                return None
            continue
        r = q / p
        if p < 0:
            low = max(low, r)
        else:
            high = min(high, r)
        if low > high:
            return None
    return (x0 + low * dx, y0 + low * dy, x0 + high * dx, y0 + high * dy)


def line_shapes(ax) -> list[dict]:
    """What each visible line of `ax` draws, in pixels (after a drawing: `renderer_of`):
    `line`, `colours` (its line, marker face and edge colours, RGB), `segments` `[K, 4]`
    (`x0, y0, x1, y1`, clipped to its clip box; none without a line style), `half_width`
    (half its line width), `markers` `[M, 4]` (a box around each marker drawn)."""
    scale = ax.figure.dpi / 72.0
    shapes = []
    for line in ax.lines:
        xy = np.asarray(line.get_xydata(), float).reshape(-1, 2)
        if not line.get_visible() or xy.size == 0:
            continue
        style = line.get_drawstyle()
        if style and style != "default":  # steps: the path drawn
            xy = np.column_stack(cbook.STEP_LOOKUP_MAP[style](xy[:, 0], xy[:, 1]))
        with np.errstate(all="ignore"):
            points = np.asarray(line.get_transform().transform(xy), float)
        finite = np.isfinite(points).all(axis=1)
        clip = line.get_clip_box() if line.get_clip_on() else None
        box = None if clip is None else clip.extents
        segments = []
        if not _none(line.get_linestyle()) and line.get_linewidth() > 0:
            for i in np.flatnonzero(finite[:-1] & finite[1:]):
                segment = (*points[i], *points[i + 1])
                segment = segment if box is None else _clip(segment, box)
                if segment is not None:
                    segments.append(segment)
        markers = np.zeros((0, 4))
        if not _none(line.get_marker()) and line.get_markersize() > 0:
            centres = points[finite]
            if box is not None:
                inside = (centres[:, 0] >= box[0]) & (centres[:, 0] <= box[2])
                centres = centres[inside & (centres[:, 1] >= box[1]) & (centres[:, 1] <= box[3])]
            half = 0.5 * (line.get_markersize() + line.get_markeredgewidth()) * scale
            markers = np.column_stack([centres - half, centres + half])
        colours = [line.get_color(), line.get_markerfacecolor(), line.get_markeredgecolor()]
        shapes.append(
            dict(
                line=line,
                colours=[to_rgb(c) for c in colours if not _none(c)],
                segments=np.asarray(segments, float).reshape(-1, 4),
                half_width=0.5 * line.get_linewidth() * scale,
                markers=markers,
            )
        )
    return shapes


def same_colour(a, b) -> bool:
    """Whether two matplotlib colours are the same colour (alpha aside)."""
    try:
        return bool(np.allclose(to_rgb(a), to_rgb(b), atol=0.02))
    except ValueError:
        return False


def lines_under(rect, shapes: list[dict], tolerance: float = 0.5) -> list[dict]:
    """The `line_shapes` that pass through (or whose markers overlap) the rotated
    rectangle `rect` (`_rectangle`) by more than `tolerance` pixels."""
    cx, cy, hw, hh, angle = rect
    reach = math.hypot(hw, hh)
    c, s = math.cos(angle), math.sin(angle)
    under = []
    for shape in shapes:
        margin = shape["half_width"] - tolerance
        segments = shape["segments"]
        near = segments[
            (np.minimum(segments[:, 0], segments[:, 2]) < cx + reach + margin)
            & (np.maximum(segments[:, 0], segments[:, 2]) > cx - reach - margin)
            & (np.minimum(segments[:, 1], segments[:, 3]) < cy + reach + margin)
            & (np.maximum(segments[:, 1], segments[:, 3]) > cy - reach - margin)
        ]
        box = (-hw - margin, -hh - margin, hw + margin, hh + margin)
        crossed = (
            box[2] > 0
            and box[3] > 0
            and any(
                _clip(
                    (
                        c * (x0 - cx) + s * (y0 - cy),
                        -s * (x0 - cx) + c * (y0 - cy),
                        c * (x1 - cx) + s * (y1 - cy),
                        -s * (x1 - cx) + c * (y1 - cy),
                    ),
                    box,
                )
                is not None
                for x0, y0, x1, y1 in near
            )
        )
        crossed = crossed or any(
            _overlap(
                ((m[0] + m[2]) / 2, (m[1] + m[3]) / 2, (m[2] - m[0]) / 2, (m[3] - m[1]) / 2, 0.0),
                rect,
                tolerance,
            )
            for m in shape["markers"]
        )
        if crossed:
            under.append(shape)
    return under


def _line_name(shape: dict) -> str:
    line = shape["line"]
    label = line.get_label()
    colour = to_hex(line.get_color())
    return f"{label!r} ({colour})" if label and not label.startswith("_") else f"in {colour}"


def _text_over_line_problems(fig: Figure, renderer, tolerance: float) -> list[str]:
    """A text of an axes (`ax.texts`: point labels, annotations) over a line of that axes
    drawn in another colour than the text's (see the module's rules)."""
    problems = []
    for index, ax in enumerate(fig.axes):
        texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        if not (ax.get_visible() and texts and ax.lines):
            continue
        shapes = line_shapes(ax)
        for text in texts:
            rect = _rectangle(text, renderer)
            for shape in lines_under(rect, shapes, tolerance):
                if not any(same_colour(text.get_color(), c) for c in shape["colours"]):
                    problems.append(
                        f"{_axes_name(ax, index)}: text {_shown(text)} lies over the line "
                        f"{_line_name(shape)}, which it does not label (another colour)"
                    )
    return problems


# ----------------------------------------------------------------------- titles


def title_gid(*lines: int) -> str:
    """The mark `title` leaves on its suptitle: how many lines each part took."""
    return " ".join([TITLE_GID, *map(str, lines)])


def _title_problems(fig: Figure) -> list[str]:
    """The suptitle over `TITLE_LINES` lines, or a part of it ending in an orphan."""
    text = getattr(fig, "_suptitle", None)
    if text is None or not text.get_visible() or not text.get_text().strip():
        return []
    lines = text.get_text().split("\n")
    problems = []
    if len(lines) > TITLE_LINES:
        problems.append(
            f"figure: suptitle {_shown(text)} takes {len(lines)} lines (at most "
            f"{TITLE_LINES}: the heading on one, the caption on the other)"
        )
    marks = (text.get_gid() or "").split()
    parts = [len(lines)]
    if marks[:1] == [TITLE_GID] and sum(map(int, marks[1:])) == len(lines):
        parts = [int(m) for m in marks[1:]]
    start = 0
    for count in parts:
        part, start = lines[start : start + count], start + count
        if count < 2:
            continue
        widths = [text_width(line, text.get_fontsize()) for line in part]
        if widths[-1] < ORPHAN_FRACTION * max(widths):
            problems.append(
                f"figure: suptitle line {part[-1]!r} is an orphan ({widths[-1]:.0f} pt of "
                f"its part's {max(widths):.0f} pt)"
            )
    return problems


# ------------------------------------------------------------------------ check


def layout_problems(fig: Figure, *, tolerance: float = 0.5) -> list[str]:
    """Overlapping and clipped text in `fig`, from matplotlib's own extents: draw it
    (Agg), then for every visible text (`_texts`: tick labels in view, axis labels,
    titles, texts, annotations, legends, suptitle and other figure texts) report

    - any part of it outside the figure's canvas (it would be cut off);
    - a text clipped by its clip box (a label cut at the axes' edge);
    - two texts that overlap (tick labels of one axis, or any two texts at all: a legend's
      entries with another axes' labels, a title with a neighbour's tick labels, two
      point labels or annotations), rotated texts by their rotated rectangles;
    - a legend's frame over a text that is not its own;
    - a text over another axes' plotting area (not its twin's);
    - a text of an axes (a point label, an annotation) over a line or markers of that
      axes drawn in another colour: a text labels the lines of its own colour only;
    - a suptitle of more than `TITLE_LINES` lines, or one whose part broken across lines
      ends in an orphan (narrower than `ORPHAN_FRACTION` of the part's widest line).

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
    problems += _text_over_line_problems(fig, renderer, tolerance)
    problems += _title_problems(fig)
    return problems
