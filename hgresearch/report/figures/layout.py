"""Layout checks of a drawn figure: no two text labels overlap, annotations stay inside their
axes (or the figure), no legend covers plotted data and every axis showing numbers has a
label. :func:`hgresearch.report.figures.style.save_figure` warns with :func:`layout_problems`; the
tests assert that every figure has none.

Text boxes are axis-aligned window extents, so rotate labels by multiples of 90 degrees: the
box of a slanted label covers its neighbours' boxes though the glyphs do not touch."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations
from typing import Any, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backend_bases import RendererBase
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox, BboxBase

#: Overlaps of at most this many pixels (at the figure's dpi) in either direction are touching,
#: not overlapping: glyph boxes carry some padding.
TOLERANCE_PX = 1.0


class FigureLayoutWarning(UserWarning):
    """A saved figure has overlapping labels, an annotation outside its axes, a legend over
    its data or an unlabelled axis."""


@dataclass(frozen=True)
class Label:
    """A text drawn on the figure and its box in display pixels."""

    text: str
    kind: str
    bbox: Bbox

    def __str__(self) -> str:
        return f"{self.kind} {self.text!r}"


def _visible(text: Text) -> bool:
    """Drawn: the text and its axes (unused panels are hidden whole) are visible."""
    return text.get_visible() and (text.axes is None or text.axes.get_visible())


def _tick_labels_in_view(fig: Figure) -> tuple[set[int], set[int]]:
    """ids of tick labels that are drawn (their tick lies in the view interval) and of those
    that are not (matplotlib keeps labels of ticks just outside the limits, undrawn)."""
    drawn: set[int] = set()
    hidden: set[int] = set()
    for axis in fig.findobj(Axis):
        low, high = sorted(axis.get_view_interval())
        span = high - low
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            loc = tick.get_loc()
            inside = loc is not None and low - 1e-9 * span <= loc <= high + 1e-9 * span
            for label in (tick.label1, tick.label2):
                (drawn if inside else hidden).add(id(label))
    return drawn, hidden


def _kind(text: Text, tick_labels: set[int]) -> str:
    if id(text) in tick_labels:
        return "tick label"
    if isinstance(text, Annotation):
        return "annotation"
    if isinstance(text.axes, Axes) and text in text.axes.texts:
        return "text"
    return "label"


def drawn_renderer(fig: Figure) -> RendererBase:
    """Draw ``fig``'s canvas and return its renderer, which knows the drawn text extents."""
    fig.canvas.draw()
    # Every canvas that draws (Agg, which the style selects, and the notebooks' inline one)
    # has get_renderer; the stub of the base class does not declare it.
    renderer: RendererBase = cast(Any, fig.canvas).get_renderer()
    return renderer


def text_labels(fig: Figure, renderer: RendererBase | None = None) -> list[Label]:
    """Every visible, non-empty text drawn on ``fig`` (titles, axis and tick labels, legend
    texts, annotations) with its window extent. Draws the canvas when no renderer is given."""
    if renderer is None:
        renderer = drawn_renderer(fig)
    drawn_ticks, hidden_ticks = _tick_labels_in_view(fig)
    labels = []
    for text in fig.findobj(Text):
        if id(text) in hidden_ticks or not text.get_text().strip() or not _visible(text):
            continue
        legend = _legend_of(text, fig)
        if legend is not None and not legend.get_visible():
            continue
        bbox = text.get_window_extent(renderer)
        if bbox.width <= 0 or bbox.height <= 0:
            continue
        labels.append(Label(text.get_text(), _kind(text, drawn_ticks), bbox))
    return labels


def _legend_of(text: Text, fig: Figure) -> Legend | None:
    for legend in fig.findobj(Legend):
        if text in legend.get_texts() or text is legend.get_title():
            return legend
    return None


def _overlap(a: Bbox, b: Bbox, tolerance: float = TOLERANCE_PX) -> bool:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return bool(width > tolerance and height > tolerance)


def overlapping_labels(fig: Figure) -> list[tuple[Label, Label]]:
    """Pairs of drawn text labels whose boxes overlap."""
    labels = text_labels(fig)
    return [(a, b) for a, b in combinations(labels, 2) if _overlap(a.bbox, b.bbox)]


def _anchored_in_data(text: Text, ax: Axes) -> bool:
    """The text is placed by data coordinates (directly or as an offset from a data point)."""
    if isinstance(text, Annotation):
        coords = text.anncoords if text.anncoords is not None else text.xycoords
        if isinstance(coords, str) and coords.startswith("offset"):
            coords = text.xycoords
        return bool(coords == "data")
    return bool(text.get_transform() == ax.transData)


def _inside(box: BboxBase, frame: BboxBase) -> bool:
    return (box.x0 >= frame.x0 - TOLERANCE_PX and box.x1 <= frame.x1 + TOLERANCE_PX
            and box.y0 >= frame.y0 - TOLERANCE_PX and box.y1 <= frame.y1 + TOLERANCE_PX)


def annotations_outside(fig: Figure) -> list[Label]:
    """Annotations and axes texts that leave their frame: the axes for a text placed in data
    coordinates (a value label pushed below the x axis collides with the tick labels), the
    figure for any other (cut off where the figure is shown)."""
    renderer = drawn_renderer(fig)
    outside = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for text in ax.texts:
            if not text.get_visible() or not text.get_text().strip():
                continue
            frame = ax.bbox if _anchored_in_data(text, ax) else fig.bbox
            box = text.get_window_extent(renderer)
            if not _inside(box, frame):
                outside.append(Label(text.get_text(), "annotation", box))
    return outside


def _data_points(ax: Axes) -> np.ndarray:
    """Display coordinates of the marks drawn in ``ax``: line vertices and scatter points."""
    points = [np.empty((0, 2))]
    for line in ax.lines:
        if isinstance(line, Line2D) and line.get_visible():
            xy = np.asarray(line.get_xydata(), float)
            if line.get_transform() == ax.transData and len(xy):
                points.append(ax.transData.transform(xy))
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible():
            offsets = np.asarray(collection.get_offsets(), float)
            if len(offsets):
                points.append(collection.get_offset_transform().transform(offsets))
    return np.concatenate(points)


def legends_over_data(fig: Figure) -> list[str]:
    """Legends drawn inside an axes that cover a bar or a plotted point of that axes."""
    renderer = drawn_renderer(fig)
    problems = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible() or not ax.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()
                and p.get_height() != 0 and p.get_width() != 0]
        if any(_overlap(box, bar.get_window_extent(renderer)) for bar in bars):
            problems.append(f"legend of {ax.get_title()!r} covers a bar")
            continue
        points = _data_points(ax)
        finite = points[np.isfinite(points).all(axis=1)]
        inside = ((finite[:, 0] > box.x0) & (finite[:, 0] < box.x1)
                  & (finite[:, 1] > box.y0) & (finite[:, 1] < box.y1))
        if inside.any():
            problems.append(f"legend of {ax.get_title()!r} covers {int(inside.sum())} "
                            "plotted point(s)")
    return problems


_NUMBER_PARTS = re.compile(r"\\mathdefault|\\times|[$}{^\s\d.,\u2212+×%-]")


def _numeric_ticks(axis: Axis) -> bool:
    """The axis shows numbers (a quantity, which needs a label with its unit), not names."""
    texts = [label.get_text() for label in axis.get_ticklabels() if label.get_visible()]
    return any(any(c.isdigit() for c in t) and not _NUMBER_PARTS.sub("", t) for t in texts)


def axes_without_labels(fig: Figure) -> list[str]:
    """Axes with numbers on an axis but no label saying what and in which unit. A panel that
    shares that axis with a labelled panel (``sharex``/``sharey``) needs none."""
    drawn_renderer(fig)
    problems = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        for name, axis, shared in (("x", ax.xaxis, ax.get_shared_x_axes()),
                                   ("y", ax.yaxis, ax.get_shared_y_axes())):
            if axis.get_label_text().strip() or not _numeric_ticks(axis):
                continue
            if any(other.get_visible() and getattr(other, f"get_{name}label")().strip()
                   for other in shared.get_siblings(ax) if other is not ax):
                continue
            problems.append(f"{name} axis of {ax.get_title() or 'a panel'!r} has no label")
    return problems


def layout_problems(fig: Figure) -> list[str]:
    """Every layout problem of ``fig`` in words; empty when the figure is readable."""
    problems = [f"{a} overlaps {b}" for a, b in overlapping_labels(fig)]
    problems += [f"{label} lies outside its axes or the figure"
                 for label in annotations_outside(fig)]
    problems += legends_over_data(fig)
    problems += axes_without_labels(fig)
    return problems


def spread_positions(wanted: np.ndarray | list[float], min_gap: float,
                     low: float = -np.inf, high: float = np.inf) -> np.ndarray:
    """Positions for labels wanted at ``wanted`` (1-D, any unit) that keep their order, lie at
    least ``min_gap`` apart and within ``[low, high]`` where there is room, each group of
    crowded labels centred on the mean of its wanted positions. Returned in input order."""
    wanted = np.asarray(wanted, float)
    order = np.argsort(wanted, kind="stable")
    clusters: list[list[int]] = []  # runs of sorted indices placed edge to edge

    def start(cluster: list[int]) -> float:
        centre = float(wanted[order[cluster]].mean())
        first = centre - min_gap * (len(cluster) - 1) / 2
        room = high - min_gap * (len(cluster) - 1)
        return max(min(first, room), low) if room >= low else low

    for i in range(len(wanted)):
        clusters.append([i])
        while len(clusters) > 1:
            before, last = clusters[-2], clusters[-1]
            if start(before) + min_gap * len(before) <= start(last) + 1e-12:
                break
            clusters[-2:] = [before + last]
    placed = np.empty(len(wanted))
    for cluster in clusters:
        first = start(cluster)
        for k, i in enumerate(cluster):
            placed[order[i]] = first + k * min_gap
    return placed
