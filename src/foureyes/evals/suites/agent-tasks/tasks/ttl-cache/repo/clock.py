import time


class SystemClock:
    def now(self):
        return time.monotonic()


class FakeClock:
    """A clock for tests: it moves only when told to."""

    def __init__(self, start=0.0):
        self._now = float(start)

    def now(self):
        return self._now

    def advance(self, seconds):
        self._now += seconds
