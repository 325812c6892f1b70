"""The report's plots as SVG drawn by foureyes itself: where matplotlib is not installed.

The same data as the PNG plots (:mod:`foureyes.evals._plots` computes it: bars, points
set apart, heat-map cells with their colours), drawn as plain SVG elements: bars, marks,
cells and text, with the page's own fonts (so Chinese needs nothing installed here).
Every text taken from the run (arm, label and baseline names) is escaped, and characters
XML cannot hold are dropped, so a plot is a well-formed document whatever the run holds.
Sizes are estimated from the text's length (wide for CJK), not measured: labels are
slanted and given room by that estimate.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Sequence

from foureyes.evals._plots import (
    ARM_COLOURS,
    PlotText,
    confusion_cells,
    correction_bars,
    cost_limits,
    cost_points,
)
from foureyes.evals.metrics import RunMetrics

__all__ = ["confusion_svg", "cost_benefit_svg", "corrections_svg", "pass_rate_svg"]

_FONT = (
    "system-ui, -apple-system, 'Segoe UI', 'Noto Sans', 'Noto Sans CJK SC', "
    "'PingFang SC', 'Microsoft YaHei', sans-serif"
)
_SIZE = 12
"""Text size in px (titles are larger)."""
_INK = "#222222"
_GRID = "#dddddd"
_SLANT = 30
"""Degrees by which category labels are slanted when there are more than two."""
# Characters XML 1.0 cannot hold (C0 controls but tab and newlines, surrogates, U+FFFE/F).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _esc(text: str) -> str:
    """``text`` safe as XML character data or a quoted attribute value."""
    return html.escape(_NOT_XML.sub("", text), quote=True)


def _width(text: str, size: float = _SIZE) -> float:
    """The estimated width of ``text`` in px: wide (CJK) characters count whole, others 0.6."""
    return sum(size if unicodedata.east_asian_width(ch) in "WF" else size * 0.6 for ch in text)


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _text(
    x: float,
    y: float,
    value: str,
    *,
    anchor: str = "middle",
    size: float = _SIZE,
    fill: str = _INK,
    rotate: float = 0,
    weight: str | None = None,
    baseline: str = "auto",
) -> str:
    turn = f' transform="rotate({_num(rotate)} {_num(x)} {_num(y)})"' if rotate else ""
    bold = f' font-weight="{weight}"' if weight else ""
    shift = f' dominant-baseline="{baseline}"' if baseline != "auto" else ""
    return (
        f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" font-size="{_num(size)}"'
        f' fill="{fill}"{bold}{shift}{turn}>{_esc(value)}</text>'
    )


def _document(width: float, height: float, title: str, body: Sequence[str]) -> str:
    """The SVG element: ``title`` drawn at the top left and said to assistive technology."""
    heading = _text(8, 20, title, anchor="start", size=14)
    w, h = math.ceil(max(width, _width(title, 14) + 16)), math.ceil(height)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}"'
        f' viewBox="0 0 {w} {h}" role="img" aria-label="{_esc(title)}"'
        f' font-family="{_esc(_FONT)}"><title>{_esc(title)}</title>'
        f'<rect width="{w}" height="{h}" fill="#ffffff"/>{heading}{"".join(body)}</svg>'
    )


class _Categories:
    """A band of categories along x (arms or labels), their labels slanted when many."""

    def __init__(self, names: Sequence[str], band: float, left: float) -> None:
        self.names = list(names)
        self.band = band
        self.slanted = len(self.names) > 2
        cos, sin = math.cos(math.radians(_SLANT)), math.sin(math.radians(_SLANT))
        widths = [_width(n) for n in self.names]
        # A slanted label runs left of its category by width * cos: keep it on the page.
        reach = max(
            (w * cos - (i + 0.5) * band for i, w in enumerate(widths) if self.slanted),
            default=0.0,
        )
        self.left = max(left, reach + 8)
        self.depth = (
            max(widths, default=0.0) * sin + _SIZE * cos + 12 if self.slanted else _SIZE + 10
        )

    @property
    def span(self) -> float:
        return self.band * len(self.names)

    def centre(self, i: int) -> float:
        return self.left + (i + 0.5) * self.band

    def labels(self, top: float) -> list[str]:
        y = top + _SIZE + 4
        if not self.slanted:
            return [_text(self.centre(i), y, n) for i, n in enumerate(self.names)]
        return [
            _text(self.centre(i), y, n, anchor="end", rotate=-_SLANT)
            for i, n in enumerate(self.names)
        ]


def _rate_axis(left: float, top: float, width: float, height: float, label: str) -> list[str]:
    """Gridlines and ticks of a 0..1 axis (shown as percentages) and its rotated label."""
    parts = []
    for step in range(6):
        value = step / 5
        y = top + height - value / 1.05 * height
        parts.append(
            f'<line x1="{_num(left)}" y1="{_num(y)}" x2="{_num(left + width)}" y2="{_num(y)}"'
            f' stroke="{_GRID}"/>'
        )
        parts.append(_text(left - 6, y + 4, f"{value:.0%}", anchor="end"))
    parts.append(
        f'<rect x="{_num(left)}" y="{_num(top)}" width="{_num(width)}" height="{_num(height)}"'
        f' fill="none" stroke="{_INK}"/>'
    )
    parts.append(_side_label(top, height, label))
    return parts


def _side_label(top: float, height: float, label: str) -> str:
    """A y axis's label, turned, made smaller if it is longer than the axis."""
    size = min(_SIZE, _SIZE * height / max(_width(label), 1.0))
    return _text(14, top + height / 2, label, rotate=-90, size=size, baseline="middle")


def _y(value: float, top: float, height: float) -> float:
    return top + height - min(max(value, 0.0), 1.05) / 1.05 * height


_TOP = 34.0
_PLOT_H = 220.0
_LEFT = 64.0


def pass_rate_svg(metrics: RunMetrics, text: PlotText) -> str:
    """Per-arm pass rate with its interval, as bars with whiskers."""
    arms = metrics.arms
    axis = _Categories([a.arm for a in arms], band=max(56.0, 320.0 / max(len(arms), 1)), left=_LEFT)
    left, top = axis.left, _TOP
    parts = _rate_axis(left, top, axis.span, _PLOT_H, text("pass_rate.y"))
    for i, a in enumerate(arms):
        x, r = axis.centre(i), a.pass_rate
        y = _y(r.estimate, top, _PLOT_H)
        tip = f"{a.arm}: {_pct(r.estimate)} [{_pct(r.low)}, {_pct(r.high)}]"
        parts.append(
            f'<rect x="{_num(x - axis.band * 0.3)}" y="{_num(y)}" width="{_num(axis.band * 0.6)}"'
            f' height="{_num(top + _PLOT_H - y)}" fill="#4c78a8"><title>{_esc(tip)}</title></rect>'
        )
        low, high = _y(r.low, top, _PLOT_H), _y(r.high, top, _PLOT_H)
        parts.append(
            f'<path d="M{_num(x)} {_num(low)}V{_num(high)}M{_num(x - 6)} {_num(low)}'
            f'h12M{_num(x - 6)} {_num(high)}h12" stroke="{_INK}" fill="none"/>'
        )
    parts += axis.labels(top + _PLOT_H)
    title = text("pass_rate.title")
    return _document(left + axis.span + 16, top + _PLOT_H + axis.depth + 8, title, parts)


def corrections_svg(metrics: RunMetrics, text: PlotText) -> str:
    """Correction against false-diversion share per non-baseline arm (:func:`correction_bars`).

    Called only when there is something to draw; with no bars it draws empty axes.
    """
    bars = correction_bars(metrics)
    axis = _Categories([b.arm for b in bars], band=max(72.0, 320.0 / max(len(bars), 1)), left=_LEFT)
    left, top = axis.left, _TOP
    label = text("corrections.y", baseline=metrics.baseline)
    parts = _rate_axis(left, top, axis.span, _PLOT_H, label)
    names = (text("corrections.correction"), text("corrections.false_diversion"))
    for i, b in enumerate(bars):
        for k, value in enumerate((b.correction, b.false_diversion)):
            x = axis.centre(i) - axis.band * 0.4 + k * axis.band * 0.4
            y = _y(value, top, _PLOT_H)
            tip = f"{b.arm}: {names[k]} {_pct(value)}"
            parts.append(
                f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(axis.band * 0.4)}"'
                f' height="{_num(top + _PLOT_H - y)}" fill="{ARM_COLOURS[k]}">'
                f"<title>{_esc(tip)}</title></rect>"
            )
    parts += axis.labels(top + _PLOT_H)
    legend_y = top + _PLOT_H + axis.depth + 14
    x = left
    for k, name in enumerate(names):
        parts.append(
            f'<rect x="{_num(x)}" y="{_num(legend_y - 10)}" width="14" height="10"'
            f' fill="{ARM_COLOURS[k]}"/>'
        )
        parts.append(_text(x + 20, legend_y, name, anchor="start"))
        x += 20 + _width(name) + 24
    title = text("corrections.title")
    width = max(left + axis.span + 16, x + 8, _width(label) + 40)
    return _document(width, legend_y + 12, title, parts)


def _marker(shape: int, x: float, y: float, colour: str, tip: str) -> str:
    r = 5.5
    tip_el = f"<title>{_esc(tip)}</title>"
    paint = f'fill="{colour}" stroke="#ffffff" stroke-width="0.8"'
    kind = shape % 5
    if kind == 0:
        return f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(r)}" {paint}>{tip_el}</circle>'
    if kind == 1:
        return (
            f'<rect x="{_num(x - r)}" y="{_num(y - r)}" width="{_num(2 * r)}"'
            f' height="{_num(2 * r)}" {paint}>{tip_el}</rect>'
        )
    corners = {
        2: [(0, -r * 1.2), (r * 1.2, 0), (0, r * 1.2), (-r * 1.2, 0)],
        3: [(0, -r * 1.2), (r * 1.1, r * 0.8), (-r * 1.1, r * 0.8)],
        4: [(0, r * 1.2), (r * 1.1, -r * 0.8), (-r * 1.1, -r * 0.8)],
    }[kind]
    points = " ".join(f"{_num(x + dx)},{_num(y + dy)}" for dx, dy in corners)
    return f'<polygon points="{points}" {paint}>{tip_el}</polygon>'


def _ticks(low: float, high: float) -> list[float]:
    """Round values from ``low`` to ``high`` (steps of 1, 2 or 5 times a power of ten)."""
    if not high > low:
        return [low]
    rough = (high - low) / 4
    power = 10 ** math.floor(math.log10(rough))
    step = max(m * power for m in (1, 2, 5) if m * power <= rough)  # 4 to 10 ticks
    first = math.ceil(low / step)
    # Rounded to the step's own digits, so 3 * 0.0002 prints as 0.0006.
    digits = max(0, -math.floor(math.log10(step)) + 1)
    return [round(n * step, digits) for n in range(first, math.floor(high / step) + 1)]


_MARK_WIDTH = 12.0
"""One marker width in px: the unit of CostPoint.offset."""


def cost_benefit_svg(metrics: RunMetrics, text: PlotText) -> str:
    """Mean cost per case against pass rate, one marker per arm, none hidden.

    Arms whose markers would cover each other are set side by side (:func:`cost_points`).
    """
    points = cost_points(metrics)
    low, high = cost_limits(points)
    left, top, width = _LEFT, _TOP, 360.0
    parts = _rate_axis(left, top, width, _PLOT_H, text("cost.y"))

    def x_of(cost: float) -> float:
        return left + (cost - low) / (high - low) * width

    for value in _ticks(low, high):
        x = x_of(value)
        parts.append(
            f'<line x1="{_num(x)}" y1="{_num(top + _PLOT_H)}" x2="{_num(x)}"'
            f' y2="{_num(top + _PLOT_H + 4)}" stroke="{_INK}"/>'
        )
        parts.append(_text(x, top + _PLOT_H + _SIZE + 6, f"{value:.6g}"))
    parts.append(_text(left + width / 2, top + _PLOT_H + 2 * _SIZE + 14, text("cost.x")))
    for p in points:
        x = x_of(p.cost_usd) + p.offset * _MARK_WIDTH
        tip = f"{p.arm}: ${p.cost_usd:.4f}, {_pct(p.pass_rate)}"
        parts.append(_marker(p.marker, x, _y(p.pass_rate, top, _PLOT_H), p.colour, tip))
    legend_x = left + width + 24
    rows = len(points) * 18
    legend_top = top + max((_PLOT_H - rows) / 2, 0)
    for n, p in enumerate(points):
        y = legend_top + n * 18 + 9
        parts.append(_marker(p.marker, legend_x + 6, y, p.colour, p.arm))
        parts.append(_text(legend_x + 18, y + 4, p.arm, anchor="start"))
    title = text("cost.title")
    legend_w = max((_width(p.arm) for p in points), default=0.0) + 30
    height = max(top + _PLOT_H + 2 * _SIZE + 24, legend_top + rows + 8)
    return _document(legend_x + legend_w, height, title, parts)


def confusion_svg(metrics: RunMetrics, arm: str, text: PlotText) -> str:
    """One arm's confusion matrix as cells coloured by count, each count in its cell's ink.

    Raises:
        KeyError: ``arm`` has no confusion matrix in ``metrics``.
    """
    cells = confusion_cells(metrics, arm)
    rows = list(metrics.labels)
    cell_w, cell_h = 60.0, 40.0
    row_w = max((_width(r) for r in rows), default=0.0)
    axis = _Categories(
        [*rows, text("confusion.none")], band=cell_w, left=max(_LEFT, row_w + 12 + 24)
    )
    left, top = axis.left, _TOP
    parts = []
    for i, row in enumerate(cells):
        y = top + i * cell_h
        parts.append(_text(left - 6, y + cell_h / 2 + 4, rows[i], anchor="end"))
        for j, c in enumerate(row):
            x = left + j * cell_w
            tip = f"{c.expected} → {c.predicted}: {c.count}"
            parts.append(
                f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(cell_w)}"'
                f' height="{_num(cell_h)}" fill="{c.fill}"><title>{_esc(tip)}</title></rect>'
            )
            parts.append(_text(x + cell_w / 2, y + cell_h / 2 + 4, str(c.count), fill=c.ink))
    height = cell_h * len(cells)
    parts.append(
        f'<rect x="{_num(left)}" y="{_num(top)}" width="{_num(axis.span)}"'
        f' height="{_num(height)}" fill="none" stroke="{_INK}"/>'
    )
    parts += axis.labels(top + height)
    bottom = top + height + axis.depth + 8
    parts.append(_text(left + axis.span / 2, bottom + _SIZE, text("confusion.predicted")))
    parts.append(_side_label(top, height, text("confusion.expected")))
    title = text("confusion.title", arm=arm)
    return _document(left + axis.span + 16, bottom + _SIZE + 10, title, parts)
