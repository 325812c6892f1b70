"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from lru import LRU
from memo import memoize
from sessions import Sessions

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


def service_calls(capacity, users):
    calls = []

    @memoize(capacity)
    def fetch(user):
        calls.append(user)
        return user.upper()

    answers = [fetch(user) for user in users]
    assert answers == [user.upper() for user in users], answers
    return calls


def live(capacity, steps, asked):
    """Which of ``asked`` are still live after ``steps`` (session ids seen in turn)."""
    sessions = Sessions(capacity)
    for sid in steps:
        sessions.seen(sid, f"user-{sid}")
    return [sid for sid in asked if sessions.user(sid) == f"user-{sid}"]


def lru_keys(capacity, script):
    cache = LRU(capacity)
    for op, key in script:
        if op == "put":
            cache.put(key, key * 2)
        else:
            cache.get(key)
    return sorted(k for k in "abcdefgh" if k in cache), len(cache)


expect("reported", lambda: service_calls(2, ["admin", "bob", "admin", "carol", "admin"]), ["admin", "bob", "carol"])
expect("no reuse", lambda: service_calls(2, ["a", "b", "c", "a"]), ["a", "b", "c", "a"])
expect("a hot key survives", lambda: service_calls(3, ["h", "a", "h", "b", "h", "c", "h", "d", "h"]), ["h", "a", "b", "c", "d"])
expect("capacity 1", lambda: service_calls(1, ["a", "a", "b", "a"]), ["a", "b", "a"])
expect("sessions: a returning user stays", lambda: live(2, ["s1", "s2", "s1", "s3"], ["s1", "s2", "s3"]), ["s1", "s3"])
expect("sessions: the idle one goes", lambda: live(3, ["s1", "s2", "s3", "s1", "s2", "s4"], ["s1", "s2", "s3", "s4"]), ["s1", "s2", "s4"])
expect("sessions: no reuse", lambda: live(2, ["s1", "s2", "s3"], ["s1", "s2", "s3"]), ["s2", "s3"])
expect("lru: a read counts as use", lambda: lru_keys(2, [("put", "a"), ("put", "b"), ("get", "a"), ("put", "c")]), (["a", "c"], 2))
expect("lru: a write counts as use", lambda: lru_keys(2, [("put", "a"), ("put", "b"), ("put", "a"), ("put", "c")]), (["a", "c"], 2))
expect("lru: a miss changes nothing", lambda: lru_keys(2, [("put", "a"), ("put", "b"), ("get", "z"), ("put", "c")]), (["b", "c"], 2))
expect("lru: overwriting keeps the size", lambda: lru_keys(3, [("put", "a"), ("put", "a"), ("put", "b"), ("put", "a")]), (["a", "b"], 2))
expect("lru: value after overwrite", lambda: (lambda c: (c.put("k", 1), c.put("k", 2), c.get("k"))[2])(LRU(2)), 2)
sys.exit(1 if failed else 0)
