class RetryPolicy:
    """How often a failing call is tried, and how long to wait in between."""

    def __init__(self, attempts, base_delay=0.5, retry_on=(ConnectionError, TimeoutError)):
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.attempts = attempts
        self.base_delay = base_delay
        self.retry_on = retry_on

    def delay(self, attempt):
        """The wait after failed attempt number ``attempt`` (the first is 1)."""
        return self.base_delay * 2 ** (attempt - 1)
