"""A wall clock the test moves by hand."""

from __future__ import annotations

import datetime as dt

__all__ = ["ManualClock"]


class ManualClock:
    """A timezone-aware UTC wall clock that moves only when the test says so."""

    def __init__(self, now: dt.datetime | None = None) -> None:
        self.now = now or dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)
