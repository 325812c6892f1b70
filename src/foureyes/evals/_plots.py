"""The report's plots, drawn with matplotlib (Agg) and returned as PNG bytes.

Their words come in the report's locale (:class:`PlotText`). Chinese needs a font with
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
    "CONFUSION",
    "CORRECTIONS",
    "COST_BENEFIT",
    "PASS_RATE",
    "Plot",
    "PlotText",
    "cjk_font",
    "confusion_png",
    "cost_benefit_png",
    "corrections_png",
    "pass_rate_png",
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
    arms = [a for a in metrics.arms if a.arm != metrics.baseline]
    xs = range(len(arms))
    ax.bar(
        [x - 0.2 for x in xs],
        [a.correction_rate or 0 for a in arms],
        0.4,
        label=text("corrections.correction"),
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [a.false_diversion_rate or 0 for a in arms],
        0.4,
        label=text("corrections.false_diversion"),
    )
    _ticks(ax, [a.arm for a in arms])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(_wrap(text("corrections.y", baseline=metrics.baseline), 28))
    ax.set_title(text("corrections.title"))
    # Outside the axes: inside, it would cover bars that reach 1.
    fig.legend(loc="outside lower center", ncols=2)


def _cost_benefit(fig: Figure, ax: Axes, metrics: RunMetrics, text: PlotText) -> None:
    # Each arm a series named in the legend: arms of the same cost and pass rate (all
    # offline arms cost 0) would otherwise write their names on top of each other.
    markers = "osD^vP*X"
    for n, a in enumerate(metrics.arms):
        ax.scatter(
            a.mean_cost_usd,
            a.pass_rate.estimate,
            s=60,
            marker=markers[n % len(markers)],
            label=a.arm,
        )
    ax.set_xlabel(text("cost.x"))
    ax.set_ylabel(text("cost.y"))
    ax.set_ylim(0, 1.05)
    ax.set_title(text("cost.title"))
    fig.legend(loc="outside right center")


def _confusion(fig: Figure, ax: Axes, metrics: RunMetrics, text: PlotText, arm: str) -> None:
    table = metrics.confusions[arm]
    rows = list(metrics.labels)
    cols = [*rows, "none"]
    values = [[table[r][c] for c in cols] for r in rows]
    ax.imshow(values, cmap="Blues")
    _ticks(ax, [*rows, text("confusion.none")])
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(text("confusion.predicted"))
    ax.set_ylabel(text("confusion.expected"))
    for i, row in enumerate(values):
        for j, count in enumerate(row):
            ax.text(j, i, str(count), ha="center", va="center")
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
