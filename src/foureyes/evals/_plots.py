"""The report's plots: what each one shows (pure), drawn with matplotlib (Agg) as PNG.

What a plot shows is computed here once, without matplotlib, by pure functions
(:func:`correction_bars`, :func:`cost_points`, :func:`confusion_cells`, and the colours
of :func:`cell_fill` and :func:`text_colour`); matplotlib draws it below, and
:mod:`foureyes.evals._svg` draws the very same data as SVG where matplotlib is not
installed. Their words come in the report's locale (:class:`PlotText`). Chinese needs a font with
ideographs, which matplotlib does not ship: the first of the usual CJK families found on
the machine is used (fonts installed after matplotlib built its font cache are looked
for too), with DejaVu Sans for Latin text. When there is none, the plots of a Chinese
report keep their English words rather than draw boxes; the page around them is still
in Chinese.
"""

from __future__ import annotations

import io
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from foureyes.core.catalogue import Catalogue
from foureyes.core.locale import Locale
from foureyes.evals.metrics import RunMetrics

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "ARM_COLOURS",
    "CONFUSION",
    "CORRECTIONS",
    "COST_BENEFIT",
    "ConfusionCell",
    "CostPoint",
    "MIN_CONTRAST",
    "PASS_RATE",
    "Plot",
    "PlotText",
    "ShareBars",
    "available",
    "cell_fill",
    "cjk_font",
    "confusion_cells",
    "confusion_png",
    "contrast_ratio",
    "correction_bars",
    "corrections_png",
    "cost_benefit_png",
    "cost_limits",
    "cost_points",
    "has_expected",
    "pass_rate_png",
    "relative_luminance",
    "text_colour",
]

# Families with both Simplified and Traditional ideographs, most common first.
_CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK TC",
    "Source Han Sans SC",
    "Source Han Sans TC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "Microsoft YaHei",
    "Microsoft JhengHei",
    "PingFang SC",
    "Heiti SC",
)
# File names of those families, for fonts installed after matplotlib's cache was built.
_CJK_FILES = (
    "NotoSansCJK",
    "SourceHanSans",
    "wqy-microhei",
    "wqy-zenhei",
    "DroidSansFallback",
    "msyh",
    "msjh",
    "PingFang",
)
_LATIN = "DejaVu Sans"
# pyplot and rcParams are process-wide: one figure is drawn at a time, whatever thread
# asks (the server draws reports off its event loop).
_DRAWING = threading.RLock()


@cache
def _matplotlib() -> tuple[ModuleType, ModuleType]:
    """The pyplot module on the Agg backend, and the font manager; imported on first use.

    matplotlib takes about half a second to import: the service, which imports this
    module for its report endpoints, pays it only when a report is drawn.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    return plt, font_manager


def available() -> bool:
    """Whether matplotlib can be imported here (the ``eval`` extra: ``foureyes[eval]``)."""
    try:
        _matplotlib()
    except ImportError:
        return False
    return True


def cjk_font() -> str | None:
    """The family name of a font with Chinese ideographs on this machine, or ``None``."""
    with _DRAWING:
        return _find_cjk_font()


@cache
def _find_cjk_font() -> str | None:
    found = _known_cjk_family()
    if found is not None:
        return found
    font_manager = _matplotlib()[1]
    for path in font_manager.findSystemFonts():
        if any(marker.lower() in Path(path).name.lower() for marker in _CJK_FILES):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):  # an unreadable file: try the next
                continue
    return _known_cjk_family()


def _known_cjk_family() -> str | None:
    names = {entry.name for entry in _matplotlib()[1].fontManager.ttflist}
    return next((family for family in _CJK_FAMILIES if family in names), None)


@dataclass(frozen=True, slots=True)
class PlotText:
    """The words of the plots in one locale, and the font families that can draw them.

    ``text("pass_rate.title")`` is the catalogue's ``plot.pass_rate.title`` in
    :attr:`locale`.
    """

    strings: Catalogue
    locale: Locale
    families: tuple[str, ...]

    @classmethod
    def of(cls, strings: Catalogue, locale: Locale, cjk: str | None) -> PlotText:
        """The plots' words in ``locale``, drawn with the CJK family ``cjk`` if any.

        Without one (``None``, see :func:`cjk_font`) the words are English whatever
        ``locale`` asks for: no font could draw Chinese.
        """
        if cjk is None:
            return cls(strings, Locale.EN, (_LATIN,))
        return cls(strings, locale, (_LATIN, cjk))

    def __call__(self, key: str, **values: str) -> str:
        """The plot string ``key`` with ``values`` filled in."""
        text = self.strings.text(f"plot.{key}", self.locale)
        return text.format(**values) if values else text


# ---- what the plots show: pure, no matplotlib ---------------------------------------

ARM_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
"""The colour of the n-th arm (cycled), the same in the PNG and the SVG plots."""

MIN_CONTRAST = 4.5
"""WCAG 2's contrast ratio for normal text (AA), which every count in a heat map meets."""

# Light to mid-dark blue-green, in sRGB: an empty cell stays pale (a count on it reads
# dark), the fullest is a mid blue (a count on it reads white), never navy or black.
_RAMP = ("#f4f9fc", "#c9e4ec", "#83c3cf", "#3f92b0", "#1f5f8b")
_DARK_INK = "#000000"
_LIGHT_INK = "#ffffff"


def _rgb(colour: str) -> tuple[int, int, int]:
    """``#rrggbb`` as three channels 0..255.

    Raises:
        ValueError: ``colour`` is not ``#rrggbb``.
    """
    if not re.fullmatch(r"#[0-9a-fA-F]{6}", colour):
        raise ValueError(f"not a #rrggbb colour: {colour!r}")
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def relative_luminance(colour: str) -> float:
    """WCAG 2's relative luminance of ``#rrggbb`` (0 black .. 1 white).

    Raises:
        ValueError: ``colour`` is not ``#rrggbb``.
    """

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2's contrast ratio of two ``#rrggbb`` colours (1 .. 21, order free).

    Raises:
        ValueError: a colour is not ``#rrggbb``.
    """
    a, b = sorted((relative_luminance(first), relative_luminance(second)))
    return (b + 0.05) / (a + 0.05)


def text_colour(background: str) -> str:
    """The ink for text on ``background``: black or white, whichever contrasts more.

    Against pure black and white, the better of the two is at least 4.58:1 on any
    background, above :data:`MIN_CONTRAST`.

    Raises:
        ValueError: ``background`` is not ``#rrggbb``.
    """
    dark = contrast_ratio(background, _DARK_INK)
    light = contrast_ratio(background, _LIGHT_INK)
    return _DARK_INK if dark >= light else _LIGHT_INK


def cell_fill(count: int, peak: int) -> str:
    """The fill of a heat-map cell holding ``count`` of at most ``peak`` (``#rrggbb``).

    Interpolated along a light-to-mid-blue ramp; ``count`` is clamped to ``0..peak`` and a
    ``peak`` below 1 counts as 1 (an empty matrix is pale all over).
    """
    share = min(max(count, 0), max(peak, 1)) / max(peak, 1)
    position = share * (len(_RAMP) - 1)
    low = min(int(position), len(_RAMP) - 2)
    t = position - low
    start, end = _rgb(_RAMP[low]), _rgb(_RAMP[low + 1])
    r, g, b = (round(a + (z - a) * t) for a, z in zip(start, end, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass(frozen=True, slots=True)
class ConfusionCell:
    """One cell of an arm's confusion matrix, with the colours it is drawn in."""

    expected: str
    """The row: the case's label."""
    predicted: str
    """The column: the arm's label (``none`` when it gave none)."""
    count: int
    """Pairs with that expected and predicted label."""
    fill: str
    """The cell's colour (:func:`cell_fill`)."""
    ink: str
    """The count's colour (:func:`text_colour` of :attr:`fill`)."""


def confusion_cells(metrics: RunMetrics, arm: str) -> tuple[tuple[ConfusionCell, ...], ...]:
    """``arm``'s confusion matrix, row by expected label, columns the labels then ``none``.

    Empty when the run has no label set. Every count is in its cell's :attr:`ink`,
    which contrasts with the cell's :attr:`fill` by at least :data:`MIN_CONTRAST`.

    Raises:
        KeyError: ``arm`` has no confusion matrix in ``metrics``.
    """
    table = metrics.confusions[arm]
    rows = list(metrics.labels)
    cols = [*rows, "none"]
    peak = max((table[r][c] for r in rows for c in cols), default=0)

    def cell(r: str, c: str) -> ConfusionCell:
        fill = cell_fill(table[r][c], peak)
        return ConfusionCell(r, c, table[r][c], fill, text_colour(fill))

    return tuple(tuple(cell(r, c) for c in cols) for r in rows)


def has_expected(metrics: RunMetrics, arm: str) -> bool:
    """Whether ``arm``'s confusion matrix counts any pair (some case had an expected label)."""
    table = metrics.confusions.get(arm, {})
    return any(count for row in table.values() for count in row.values())


@dataclass(frozen=True, slots=True)
class ShareBars:
    """One non-baseline arm in the corrections plot: its two shares of the paired cases."""

    arm: str
    """The arm."""
    correction: float
    """Share the baseline got wrong and the arm right."""
    false_diversion: float
    """Share the baseline got right and the arm wrong."""


def correction_bars(metrics: RunMetrics) -> tuple[ShareBars, ...]:
    """The bars of the corrections plot, one pair per non-baseline arm, in arm order.

    Empty when there is nothing to draw: no arm but the baseline, or no arm corrected or
    diverted any paired case (every arm passed and failed where the baseline did). The
    report then says so in a sentence instead of drawing empty axes.
    """
    bars = tuple(
        ShareBars(a.arm, a.correction_rate or 0.0, a.false_diversion_rate or 0.0)
        for a in metrics.arms
        if a.arm != metrics.baseline
    )
    return bars if any(b.correction or b.false_diversion for b in bars) else ()


@dataclass(frozen=True, slots=True)
class CostPoint:
    """One arm in the cost-against-benefit plot."""

    arm: str
    """The arm."""
    cost_usd: float
    """Mean cost per case (the x value, never moved)."""
    pass_rate: float
    """Pass rate (the y value, never moved)."""
    colour: str
    """The arm's colour (:data:`ARM_COLOURS`)."""
    marker: int
    """The arm's marker shape, an index into the renderer's shapes."""
    offset: float
    """Sideways shift of the marker, in marker widths: 0 for an arm alone, spread evenly
    around 0 for arms whose markers would cover each other."""
    together: tuple[str, ...]
    """Every arm drawn at (or next to) this point, itself included, in arm order."""


_NEAR_X = 0.03
"""Two markers cover each other when closer than this share of the cost axis..."""
_NEAR_Y = 0.05
"""...and this share of the pass-rate axis."""


def cost_points(metrics: RunMetrics) -> tuple[CostPoint, ...]:
    """The points of the cost-against-benefit plot, one per arm, in arm order.

    Arms whose markers would overlap (closer than 3 % of the cost range and 5 points of
    pass rate, chained) are spread side by side: the n-th of ``k`` such arms, in arm
    order, is offset by ``n - (k - 1) / 2`` marker widths. The rule depends only on the
    values, so the same run is drawn the same way every time, and no arm is hidden.
    """
    arms = list(metrics.arms)
    costs = [a.mean_cost_usd for a in arms]
    span = (max(costs) - min(costs)) if costs else 0.0
    # Union-find over "would overlap": a chain of near markers is one group.
    parent = list(range(len(arms)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(arms):
        for j in range(i):
            b = arms[j]
            dx = abs(a.mean_cost_usd - b.mean_cost_usd) / span if span else 0.0
            dy = abs(a.pass_rate.estimate - b.pass_rate.estimate)
            if dx < _NEAR_X and dy < _NEAR_Y:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(arms)):
        groups.setdefault(root(i), []).append(i)
    points = []
    for i, a in enumerate(arms):
        group = groups[root(i)]
        slot = group.index(i)
        points.append(
            CostPoint(
                arm=a.arm,
                cost_usd=a.mean_cost_usd,
                pass_rate=a.pass_rate.estimate,
                colour=ARM_COLOURS[i % len(ARM_COLOURS)],
                marker=i,
                offset=slot - (len(group) - 1) / 2,
                together=tuple(arms[k].arm for k in group),
            )
        )
    return tuple(points)


def cost_limits(points: tuple[CostPoint, ...]) -> tuple[float, float]:
    """The cost axis's range: every point inside with a margin, never of zero width."""
    costs = [p.cost_usd for p in points] or [0.0]
    low, high = min(costs), max(costs)
    pad = (high - low) * 0.08 if high > low else max(abs(high) * 0.5, 0.001)
    return low - pad, high + pad


@contextmanager
def _figure(text: PlotText, size: tuple[float, float]) -> Iterator[tuple[Figure, Axes]]:
    # Named families, not the generic "sans-serif": matplotlib falls back glyph by glyph
    # only along an explicit list. Constrained layout makes room for every label (rotated
    # ticks, a legend outside the axes) instead of letting them overlap.
    plt = _matplotlib()[0]
    with _DRAWING, plt.rc_context({"font.family": list(text.families)}):
        fig, ax = plt.subplots(figsize=size, layout="constrained")
        try:
            yield fig, ax
        finally:
            plt.close(fig)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # A name from the run (an arm, a label) in a script no font here can draw comes
        # out as boxes; that is all matplotlib's warning would say.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


_Draw = Callable[..., None]


@dataclass(frozen=True, slots=True)
class Plot:
    """One of the report's plots: how it is drawn, and at what size."""

    draw: _Draw
    """Draws into ``(fig, ax, metrics, text, *args)``."""
    size: Callable[[RunMetrics], tuple[float, float]]
    """The figure's size in inches, for these metrics."""

    @contextmanager
    def figure(self, metrics: RunMetrics, text: PlotText, *args: str) -> Iterator[Figure]:
        """The drawn figure, laid out (every text artist placed), until the block ends."""
        with _figure(text, self.size(metrics)) as (fig, ax):
            self.draw(fig, ax, metrics, text, *args)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Glyph .* missing from font")
                fig.canvas.draw()
            yield fig

    def png(self, metrics: RunMetrics, text: PlotText, *args: str) -> bytes:
        """The plot as PNG bytes."""
        with self.figure(metrics, text, *args) as fig:
            return _png(fig)


def _ticks(ax: Axes, names: list[str]) -> None:
    """Arm or label names under the x axis, wrapped and slanted so none overlaps the next."""
    positions = list(range(len(names)))
    ax.set_xticks(positions, [_wrap(name) for name in names])
    if len(names) > 2:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")


def _wrap(name: str, width: int = 14) -> str:
    """``name`` broken at its hyphens or underscores into lines of about ``width``."""
    if len(name) <= width:
        return name
    lines, line = [], ""
    for part in re.split(r"(?<=[-_])", name):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])


def _pass_rate(fig: Figure, ax: Axes, metrics: RunMetrics, text: PlotText) -> None:
    names = [a.arm for a in metrics.arms]
    rates = [a.pass_rate.estimate for a in metrics.arms]
    below = [a.pass_rate.estimate - a.pass_rate.low for a in metrics.arms]
    above = [a.pass_rate.high - a.pass_rate.estimate for a in metrics.arms]
    ax.bar(range(len(names)), rates, yerr=[below, above], capsize=6, color="#4c78a8")
    _ticks(ax, names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(text("pass_rate.y"))
    ax.set_title(text("pass_rate.title"))


def _corrections(fig: Figure, ax: Axes, metrics: RunMetrics, text: PlotText) -> None:
    bars = correction_bars(metrics)
    xs = range(len(bars))
    ax.bar(
        [x - 0.2 for x in xs],
        [b.correction for b in bars],
        0.4,
        color=ARM_COLOURS[0],
        label=text("corrections.correction"),
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [b.false_diversion for b in bars],
        0.4,
        color=ARM_COLOURS[1],
        label=text("corrections.false_diversion"),
    )
    _ticks(ax, [b.arm for b in bars])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(_wrap(text("corrections.y", baseline=metrics.baseline), 28))
    ax.set_title(text("corrections.title"))
    # Outside the axes: inside, it would cover bars that reach 1.
    fig.legend(loc="outside lower center", ncols=2)


# Matplotlib's shapes for CostPoint.marker (cycled); _svg draws the same ones.
_MARKERS = "osD^v"
_MARKER_POINTS = 9.0
"""One marker width, in points: the unit of CostPoint.offset."""


def _cost_benefit(fig: Figure, ax: Axes, metrics: RunMetrics, text: PlotText) -> None:
    # Each arm a series named in the legend, and arms whose markers would cover each
    # other set side by side (cost_points): all offline arms cost 0, say.
    from matplotlib.transforms import ScaledTranslation

    for p in cost_points(metrics):
        shift = ScaledTranslation(p.offset * _MARKER_POINTS / 72, 0, fig.dpi_scale_trans)
        ax.scatter(
            p.cost_usd,
            p.pass_rate,
            s=60,
            color=p.colour,
            marker=_MARKERS[p.marker % len(_MARKERS)],
            label=p.arm,
            transform=ax.transData + shift,
            clip_on=False,
            zorder=3,
        )
    ax.set_xlim(*cost_limits(cost_points(metrics)))
    ax.set_xlabel(text("cost.x"))
    ax.set_ylabel(text("cost.y"))
    ax.set_ylim(0, 1.05)
    ax.set_title(text("cost.title"))
    fig.legend(loc="outside right center")


def _confusion(fig: Figure, ax: Axes, metrics: RunMetrics, text: PlotText, arm: str) -> None:
    cells = confusion_cells(metrics, arm)
    rows = list(metrics.labels)
    # The cells' own colours (not a colormap's): the inks were chosen against them.
    ax.imshow([[tuple(v / 255 for v in _rgb(c.fill)) for c in row] for row in cells])
    _ticks(ax, [*rows, text("confusion.none")])
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(text("confusion.predicted"))
    ax.set_ylabel(text("confusion.expected"))
    for i, row in enumerate(cells):
        for j, c in enumerate(row):
            ax.text(j, i, str(c.count), ha="center", va="center", color=c.ink)
    ax.set_title(_wrap(text("confusion.title", arm=arm), 40))


def _confusion_size(metrics: RunMetrics) -> tuple[float, float]:
    count = len(metrics.labels)
    return (1.1 * (count + 1) + 2.5, 0.8 * count + 2.5)


PASS_RATE = Plot(_pass_rate, lambda _: (6, 3.5))
"""Per-arm pass rate with its bootstrap interval."""
CORRECTIONS = Plot(_corrections, lambda _: (6, 4))
"""Correction rate against false-diversion rate per non-baseline arm."""
COST_BENEFIT = Plot(_cost_benefit, lambda _: (7, 3.5))
"""Mean cost per case against pass rate."""
CONFUSION = Plot(_confusion, _confusion_size)
"""One arm's confusion matrix as a heat map (the arm is the extra argument)."""


def pass_rate_png(metrics: RunMetrics, text: PlotText) -> bytes:
    """Per-arm pass rate with its bootstrap interval."""
    return PASS_RATE.png(metrics, text)


def corrections_png(metrics: RunMetrics, text: PlotText) -> bytes:
    """Correction rate against false-diversion rate per non-baseline arm."""
    return CORRECTIONS.png(metrics, text)


def cost_benefit_png(metrics: RunMetrics, text: PlotText) -> bytes:
    """Mean cost per case against pass rate."""
    return COST_BENEFIT.png(metrics, text)


def confusion_png(metrics: RunMetrics, arm: str, text: PlotText) -> bytes:
    """One arm's confusion matrix as a heat map."""
    return CONFUSION.png(metrics, text, arm)
