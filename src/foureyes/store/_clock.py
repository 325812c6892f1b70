"""Wall-clock time for the store: always timezone-aware UTC, injectable for tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from foureyes.core.errors import UsageError

__all__ = ["WallClock", "require_utc", "utc_now"]

WallClock = Callable[[], dt.datetime]
"""Returns the current time as an aware datetime; daily limits and expiry are read from it."""


def utc_now() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


def require_utc(value: dt.datetime, what: str) -> dt.datetime:
    """``value`` converted to UTC.

    Raises:
        UsageError: when ``value`` is naive, since its zone would be a guess.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise UsageError(f"{what} must be a timezone-aware datetime, got naive {value!r}")
    return value.astimezone(dt.UTC)
