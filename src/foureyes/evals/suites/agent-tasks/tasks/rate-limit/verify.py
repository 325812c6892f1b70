"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from clock import FakeClock
from limiter import RateLimiter

failed = 0


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{label}: expected {expected!r}, got {got!r}")


def answers(limit, window, requests):
    """The answers to ``requests``, (time, user) pairs in time order."""
    clock = FakeClock()
    limiter = RateLimiter(limit, window, clock)
    got = []
    for t, user in requests:
        clock.time = t
        got.append(limiter.allow(user))
    return got


def times(*ts, user="ann"):
    return [(t, user) for t in ts]


T, F = True, False
expect("reported retries", lambda: answers(3, 60, times(0, 1, 2, 3, 15, 25, 35, 45, 55, 65)), [T, T, T, F, F, F, F, F, F, T])
expect("retries on the boundary", lambda: answers(3, 60, times(0, 1, 2, 3, 10, 20, 30, 40, 50, 60, 70)), [T, T, T, F, F, F, F, F, F, T, T])
expect("under the limit", lambda: answers(3, 60, times(0, 10, 20)), [T, T, T])
expect("over the limit", lambda: answers(3, 60, times(0, 10, 20, 30)), [T, T, T, F])
expect("a slot frees exactly window seconds later", lambda: answers(3, 60, times(0, 10, 20, 60)), [T, T, T, T])
expect("not a moment before", lambda: answers(3, 60, times(0, 10, 20, 59.5)), [T, T, T, F])
expect("one slot at a time", lambda: answers(3, 60, times(0, 10, 20, 60, 61, 70, 71)), [T, T, T, T, F, T, F])
expect("refused requests do not count", lambda: answers(2, 10, times(0, 1, 2, 3, 4, 10, 11)), [T, T, F, F, F, T, T])
expect("limit 1", lambda: answers(1, 5, times(0, 4.9, 5, 9, 10)), [T, F, T, F, T])
expect("users apart", lambda: answers(1, 60, [(0, "ann"), (1, "bob"), (2, "ann"), (3, "bob"), (60, "ann"), (61, "bob")]), [T, T, F, F, T, T])
expect("burst at one instant", lambda: answers(3, 60, times(5, 5, 5, 5, 65)), [T, T, T, F, T])
expect("long quiet spell", lambda: answers(2, 60, times(0, 1, 1000, 1000.5, 1001)), [T, T, T, T, F])
sys.exit(1 if failed else 0)
