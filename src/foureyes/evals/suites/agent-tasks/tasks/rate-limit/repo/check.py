"""The reported case (run: python check.py): limit 3 per 60 s, a client that retries."""

import os
import sys

sys.path.insert(0, os.getcwd())
from clock import FakeClock
from limiter import RateLimiter

clock = FakeClock()
limiter = RateLimiter(3, 60, clock)
answers = {}
for t in [0, 1, 2, 3, 15, 25, 35, 45, 55, 65]:
    clock.time = t
    answers[t] = limiter.allow("ann")
expected = {0: True, 1: True, 2: True, 3: False, 15: False, 25: False, 35: False,
            45: False, 55: False, 65: True}
wrong = {t: answers[t] for t in answers if answers[t] != expected[t]}
if wrong:
    print(f"answers that differ (t: got): {wrong}")
    sys.exit(1)
