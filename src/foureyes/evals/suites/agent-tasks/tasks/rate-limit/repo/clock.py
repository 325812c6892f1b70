import time


class SystemClock:
    def now(self):
        return time.monotonic()


class FakeClock:
    """A clock for tests, set by hand."""

    def __init__(self, start=0.0):
        self.time = float(start)

    def now(self):
        return self.time
