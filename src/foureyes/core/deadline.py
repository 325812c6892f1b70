"""Deadlines: one per run, passed down every call, so no call outlives the run."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from foureyes.core.errors import DeadlineExceeded, UsageError

__all__ = ["Clock", "Deadline"]

Clock = Callable[[], float]
"""A monotonic clock in seconds; ``time.monotonic`` unless a test injects another."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point in time after which no new model call may start.

    Each call gets ``min(route timeout, time left)`` from :meth:`timeout_for`, so a slow
    route cannot carry a run past its deadline.
    """

    length_s: float
    """Length of the deadline in seconds (``inf`` for none)."""
    started_at: float
    """Clock reading when the deadline started."""
    clock: Clock = field(default=time.monotonic, compare=False, repr=False)
    """The clock it is measured with."""

    @classmethod
    def after(cls, seconds: float, *, clock: Clock = time.monotonic) -> Deadline:
        """A deadline ``seconds`` from now."""
        if not seconds > 0:
            raise UsageError(f"a deadline must be positive, got {seconds!r}")
        return cls(length_s=float(seconds), started_at=clock(), clock=clock)

    @classmethod
    def never(cls, *, clock: Clock = time.monotonic) -> Deadline:
        """A deadline that never passes; route timeouts still apply."""
        return cls(length_s=math.inf, started_at=clock(), clock=clock)

    def elapsed(self) -> float:
        """Seconds since the deadline started."""
        return self.clock() - self.started_at

    def remaining(self) -> float:
        """Seconds left (zero or negative once passed)."""
        return self.length_s - self.elapsed()

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.remaining() <= 0

    def timeout_for(self, route_timeout_s: float) -> float:
        """The timeout for the next call: the route's timeout or the time left, whichever is less.

        Raises:
            DeadlineExceeded: when no time is left, so the call must not start.
        """
        left = self.remaining()
        if left <= 0:
            raise DeadlineExceeded("deadline", self.elapsed(), self.length_s)
        return min(route_timeout_s, left)
