from collections import defaultdict, deque

from clock import SystemClock


class RateLimiter:
    """Allows each user ``limit`` requests per ``window`` seconds."""

    def __init__(self, limit, window, clock=None):
        self.limit = limit
        self.window = window
        self.clock = clock or SystemClock()
        self._requests = defaultdict(deque)

    def allow(self, user):
        """Whether the request ``user`` makes now may go ahead."""
        now = self.clock.now()
        recent = self._requests[user]
        while recent and now - recent[0] > self.window:
            recent.popleft()
        recent.append(now)
        return len(recent) <= self.limit
