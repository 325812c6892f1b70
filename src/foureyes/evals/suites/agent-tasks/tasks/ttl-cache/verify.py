"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from cache import TTLCache
from clock import FakeClock

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


def run(ttl, script):
    """Play ``script`` (("set", key, value) | ("at", t) | ("get", key) | ...) and record reads."""
    clock = FakeClock()
    cache = TTLCache(ttl, clock)
    seen = []
    for step in script:
        if step[0] == "at":
            clock.advance(step[1] - clock.now())
        elif step[0] == "set":
            cache.set(step[1], step[2])
        elif step[0] == "get":
            seen.append(cache.get(step[1], "<missing>"))
        elif step[0] == "in":
            seen.append(step[1] in cache)
        elif step[0] == "len":
            seen.append(len(cache))
    return seen


S, A, G = "set", "at", "get"
expect("reported refresh", lambda: run(60, [(S, "t", 1), (A, 50), (S, "t", 2), (A, 70), (G, "t")]), [2])
expect("fresh entry", lambda: run(60, [(S, "a", 1), (A, 30), (G, "a")]), [1])
expect("just before ttl", lambda: run(60, [(S, "a", 1), (A, 59.5), (G, "a")]), [1])
expect("exactly at ttl", lambda: run(60, [(S, "a", 1), (A, 60), (G, "a")]), ["<missing>"])
expect("after ttl", lambda: run(60, [(S, "a", 1), (A, 61), (G, "a")]), ["<missing>"])
expect("never set", lambda: run(60, [(G, "a")]), ["<missing>"])
expect("refresh with same value", lambda: run(60, [(S, "a", 1), (A, 30), (S, "a", 1), (A, 80), (G, "a")]), [1])
expect("refreshed entry at last set + ttl", lambda: run(60, [(S, "a", 1), (A, 30), (S, "a", 2), (A, 90), (G, "a")]), ["<missing>"])
expect("overwrite", lambda: run(60, [(S, "a", 1), (S, "a", 2), (G, "a")]), [2])
expect("keys expire apart", lambda: run(60, [(S, "a", 1), (A, 30), (S, "b", 2), (A, 70), (G, "a"), (G, "b")]), ["<missing>", 2])
expect("set after expiry", lambda: run(60, [(S, "a", 1), (A, 70), (G, "a"), (S, "a", 3), (A, 100), (G, "a")]), ["<missing>", 3])
expect("in before and at ttl", lambda: run(10, [(S, "a", 1), (A, 9), ("in", "a"), (A, 10), ("in", "a")]), [True, False])
expect("len counts live entries", lambda: run(60, [(S, "a", 1), (A, 30), (S, "b", 2), (A, 65), ("len",)]), [1])
expect("len at ttl", lambda: run(5, [(S, "a", 1), (S, "b", 1), (A, 5), ("len",)]), [0])
expect("short ttl", lambda: run(1, [(S, "a", 1), (A, 0.5), (G, "a"), (A, 1), (G, "a")]), [1, "<missing>"])
expect("falsy values are values", lambda: run(60, [(S, "a", 0), (S, "b", None), (A, 1), (G, "a"), ("in", "b")]), [0, True])
sys.exit(1 if failed else 0)
