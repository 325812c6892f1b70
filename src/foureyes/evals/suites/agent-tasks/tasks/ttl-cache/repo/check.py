"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from cache import TTLCache
from clock import FakeClock

clock = FakeClock()
cache = TTLCache(60, clock)
cache.set("token", "t1")
clock.advance(50)
cache.set("token", "t2")  # the refresh
clock.advance(20)
got = cache.get("token")
if got != "t2":
    print(f"t=70, token refreshed at t=50: expected 't2', got {got!r}")
    sys.exit(1)
