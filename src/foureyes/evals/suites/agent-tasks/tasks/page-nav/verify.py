"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from links import nav
from paging import page_items

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


def missing(label, thunk):
    global failed
    try:
        got = thunk()
    except LookupError:
        return
    except Exception as exc:
        got = f"{type(exc).__name__}: {exc}"
    failed += 1
    print(f"{label}: expected LookupError, got {got!r}")


items = list(range(1, 46))
expect("reported: page 4 of 45", lambda: nav(4, 45, 10), {"prev": 3, "next": 5, "last": 5})
expect("reported: page 5 of 45", lambda: page_items(items, 5, 10), [41, 42, 43, 44, 45])
expect("last page of 45", lambda: nav(5, 45, 10), {"prev": 4, "next": None, "last": 5})
missing("no page 6 of 45", lambda: page_items(items, 6, 10))
expect("40 results: page 4 is the last", lambda: nav(4, 40, 10), {"prev": 3, "next": None, "last": 4})
missing("40 results: no page 5", lambda: page_items(list(range(40)), 5, 10))
expect("40 results: page 4", lambda: page_items(list(range(40)), 4, 10), list(range(30, 40)))
expect("10 results: one page", lambda: nav(1, 10, 10), {"prev": None, "next": None, "last": 1})
expect("11 results: two pages", lambda: nav(1, 11, 10), {"prev": None, "next": 2, "last": 2})
expect("11 results: page 2", lambda: page_items(list(range(11)), 2, 10), [10])
expect("1 result", lambda: (nav(1, 1, 10), page_items(["a"], 1, 10)), ({"prev": None, "next": None, "last": 1}, ["a"]))
expect("no results: page 1, empty", lambda: (nav(1, 0, 10), page_items([], 1, 10)), ({"prev": None, "next": None, "last": 1}, []))
missing("no results: no page 2", lambda: page_items([], 2, 10))
missing("no page 0", lambda: page_items(items, 0, 10))
expect("one per page", lambda: (nav(3, 3, 1), page_items(["a", "b", "c"], 3, 1)), ({"prev": 2, "next": None, "last": 3}, ["c"]))
expect("per page above the total", lambda: nav(1, 7, 50), {"prev": None, "next": None, "last": 1})
sys.exit(1 if failed else 0)
