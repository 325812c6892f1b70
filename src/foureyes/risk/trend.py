"""The trend L2 sees: how many recent days had a negative assessment, and the current run.

A pure function of persisted assessment levels: the store reads them, this module counts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from foureyes.core.errors import UsageError
from foureyes.risk.levels import RiskLevel

__all__ = ["NEGATIVE_FROM", "Trend", "compute_trend"]

NEGATIVE_FROM = RiskLevel.MEDIUM
"""An assessment at this level or above makes its day a negative day."""


@dataclass(frozen=True, slots=True)
class Trend:
    """Recent assessments of one conversation, counted by UTC day."""

    days: int
    """Length of the window in days, today included."""
    assessed_days: int
    """Days in the window with at least one usable assessment."""
    negative_days: int
    """Days in the window with at least one assessment at ``medium`` or above."""
    consecutive_negative_days: int
    """Negative days in a row up to today (or up to yesterday, when today has no
    assessment yet)."""

    def describe(self) -> str:
        """The trend as one English sentence for the L2 prompt (written by code)."""
        if self.assessed_days == 0:
            return f"Trend: no earlier assessments in the last {self.days} days."
        return (
            f"Trend over the last {self.days} days: {self.assessed_days} days assessed, "
            f"{self.negative_days} of them negative (medium or above); "
            f"{self.consecutive_negative_days} consecutive negative days up to now."
        )

    def as_dict(self) -> dict[str, int]:
        """JSON-ready counts."""
        return {
            "days": self.days,
            "assessed_days": self.assessed_days,
            "negative_days": self.negative_days,
            "consecutive_negative_days": self.consecutive_negative_days,
        }


def compute_trend(
    levels: Iterable[tuple[dt.date, RiskLevel]], *, today: dt.date, days: int
) -> Trend:
    """Count negative days among ``levels`` in the ``days`` UTC days ending ``today``.

    Args:
        levels: ``(day, level)`` of each usable assessment; entries outside the window
            are ignored, so callers may pass a wider range.
        today: the current UTC day, the last day of the window.
        days: the window's length (at least 1).

    Raises:
        UsageError: ``days`` is less than 1.
    """
    if days < 1:
        raise UsageError(f"a trend needs at least one day, got {days}")
    first = today - dt.timedelta(days=days - 1)
    assessed: set[dt.date] = set()
    negative: set[dt.date] = set()
    for day, level in levels:
        if first <= day <= today:
            assessed.add(day)
            if level >= NEGATIVE_FROM:
                negative.add(day)
    # Today's message is usually the one being assessed, so a run that ended yesterday
    # is still current while today has nothing recorded.
    day = today if today in assessed else today - dt.timedelta(days=1)
    run = 0
    while day >= first and day in negative:
        run += 1
        day -= dt.timedelta(days=1)
    return Trend(
        days=days,
        assessed_days=len(assessed),
        negative_days=len(negative),
        consecutive_negative_days=run,
    )
