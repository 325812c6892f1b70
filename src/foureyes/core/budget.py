"""Budgets: a per-run call budget, and the contract of the persistent spend ledger."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from foureyes.core.errors import BudgetExhausted, UsageError

__all__ = [
    "CallBudget",
    "Reservation",
    "SpendLedger",
    "SpendLimit",
    "SpendUsage",
    "cost_usd",
    "utc_day",
]


def utc_day(now: dt.datetime | None = None) -> dt.date:
    """The UTC calendar day daily limits are counted in."""
    return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).date()


def cost_usd(
    prompt_tokens: int, completion_tokens: int, *, price_in: float, price_out: float
) -> float:
    """Cost of one call in USD, with prices per million tokens."""
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000


class CallBudget:
    """How many model calls one run may still make.

    A run owns its budget and takes from it before each call; it is the one mutable
    counter in a run, so it is not shared between runs.
    """

    def __init__(self, max_calls: int) -> None:
        """Create a budget of ``max_calls`` calls (at least one)."""
        if max_calls < 1:
            raise UsageError(f"a call budget needs at least one call, got {max_calls}")
        self.max_calls = max_calls
        self.used = 0

    @property
    def remaining(self) -> int:
        """Calls still allowed."""
        return self.max_calls - self.used

    def take(self) -> None:
        """Account for one call about to start.

        Raises:
            BudgetExhausted: when the budget has no call left; nothing is taken then.
        """
        if self.used >= self.max_calls:
            raise BudgetExhausted("calls", self.used + 1, self.max_calls)
        self.used += 1

    def __repr__(self) -> str:
        return f"CallBudget(used={self.used}, max_calls={self.max_calls})"


@dataclass(frozen=True, slots=True)
class SpendLimit:
    """The daily limits on one ledger key (a route, or a named limit such as ``risk_l1``)."""

    key: str
    """Ledger key, e.g. ``route:flash`` or ``limit:risk_l1``."""
    max_calls: int | None = None
    """Calls allowed per UTC day; ``None`` for no call limit."""
    max_usd: float | None = None
    """Spend allowed per UTC day in USD; ``None`` for no spend limit."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """Room reserved in the ledger for one call, to be committed or released exactly once."""

    id: str
    """Unique id of the reservation."""
    key: str
    """Ledger key it was taken from."""
    day: dt.date
    """UTC day it counts against."""
    calls: int
    """Calls reserved."""
    usd: float
    """Spend reserved, in USD (the worst case for the call)."""


@dataclass(frozen=True, slots=True)
class SpendUsage:
    """What one ledger key has used and holds reserved on one day."""

    key: str
    day: dt.date
    calls: int
    """Committed calls."""
    usd: float
    """Committed spend in USD."""
    reserved_calls: int
    """Calls reserved and not yet committed or released."""
    reserved_usd: float
    """Spend reserved and not yet committed or released."""


class SpendLedger(Protocol):
    """Daily calls and spend per key, persisted, with atomic reserve and commit.

    ``reserve`` either takes room for the whole call or raises: two workers can never both
    take the last unit. ``commit`` replaces the reservation with what the call really
    used; ``release`` returns it untouched (the call never started).
    """

    async def reserve(self, limit: SpendLimit, *, calls: int, usd: float) -> Reservation:
        """Reserve room for a call against ``limit`` on today's UTC day.

        Raises:
            BudgetExhausted: when the call would exceed a daily limit.
            StoreError: when the ledger cannot be read or written.
        """
        ...

    async def commit(self, reservation: Reservation, *, calls: int, usd: float) -> None:
        """Record what the reserved call actually used and drop the reservation."""
        ...

    async def release(self, reservation: Reservation) -> None:
        """Drop the reservation without recording use."""
        ...

    async def usage(self, key: str, day: dt.date) -> SpendUsage:
        """Committed and reserved use of ``key`` on ``day``."""
        ...
