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
import threading
import warnings
from collections.abc import Iterator
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
    # only along an explicit list.
    plt = _matplotlib()[0]
    with _DRAWING, plt.rc_context({"font.family": list(text.families)}):
        fig, ax = plt.subplots(figsize=size)
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
        fig.tight_layout()
        fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def pass_rate_png(metrics: RunMetrics, text: PlotText) -> bytes:
    """Per-arm pass rate with its bootstrap interval."""
    with _figure(text, (6, 3.5)) as (fig, ax):
        names = [a.arm for a in metrics.arms]
        rates = [a.pass_rate.estimate for a in metrics.arms]
        below = [a.pass_rate.estimate - a.pass_rate.low for a in metrics.arms]
        above = [a.pass_rate.high - a.pass_rate.estimate for a in metrics.arms]
        ax.bar(names, rates, yerr=[below, above], capsize=6, color="#4c78a8")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(text("pass_rate.y"))
        ax.set_title(text("pass_rate.title"))
        return _png(fig)


def corrections_png(metrics: RunMetrics, text: PlotText) -> bytes:
    """Correction rate against false-diversion rate per non-baseline arm."""
    with _figure(text, (6, 3.5)) as (fig, ax):
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
        ax.set_xticks(list(xs), [a.arm for a in arms])
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(text("corrections.y", baseline=metrics.baseline))
        ax.set_title(text("corrections.title"))
        ax.legend()
        return _png(fig)


def cost_benefit_png(metrics: RunMetrics, text: PlotText) -> bytes:
    """Mean cost per case against pass rate."""
    with _figure(text, (6, 3.5)) as (fig, ax):
        for a in metrics.arms:
            ax.scatter(a.mean_cost_usd, a.pass_rate.estimate, s=60)
            ax.annotate(
                a.arm,
                (a.mean_cost_usd, a.pass_rate.estimate),
                xytext=(5, 5),
                textcoords="offset points",
            )
        ax.set_xlabel(text("cost.x"))
        ax.set_ylabel(text("cost.y"))
        ax.set_ylim(0, 1.05)
        ax.set_title(text("cost.title"))
        return _png(fig)


def confusion_png(metrics: RunMetrics, arm: str, text: PlotText) -> bytes:
    """One arm's confusion matrix as a heat map."""
    table = metrics.confusions[arm]
    rows = list(metrics.labels)
    cols = [*rows, "none"]
    values = [[table[r][c] for c in cols] for r in rows]
    size = (1.1 * len(cols) + 1.5, 0.8 * len(rows) + 1.5)
    with _figure(text, size) as (fig, ax):
        ax.imshow(values, cmap="Blues")
        ax.set_xticks(range(len(cols)), [*rows, text("confusion.none")])
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xlabel(text("confusion.predicted"))
        ax.set_ylabel(text("confusion.expected"))
        for i, row in enumerate(values):
            for j, count in enumerate(row):
                ax.text(j, i, str(count), ha="center", va="center")
        ax.set_title(text("confusion.title", arm=arm))
        return _png(fig)
