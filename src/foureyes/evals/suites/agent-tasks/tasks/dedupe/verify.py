"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from dedupe import unique


def first(pair):
    return pair[0]


def row_id(row):
    return row["id"]


CASES = [
    (([3, 3, 1, 2],), [3, 1, 2]),
    (([3, 1, 3, 2],), [3, 1, 2]),
    ((["b", "a", "b", "a"],), ["b", "a"]),
    (([],), []),
    (([1],), [1]),
    (([2, 1, 2, 1, 3],), [2, 1, 3]),
    (("mississippi",), ["m", "i", "s", "p"]),
    ((["Apple", "apple", "Pear", "APPLE"], str.lower), ["Apple", "Pear"]),
    ((["b", "A", "a", "B"], str.lower), ["b", "A"]),
    (([-1, 1, 2, -2], abs), [-1, 2]),
    ((["aa", "b", "cc", "d"], len), ["aa", "b"]),
    (([("a", 1), ("a", 2), ("b", 3)], first), [("a", 1), ("b", 3)]),
    (([{"id": 1, "v": "x"}, {"id": 1, "v": "y"}, {"id": 2, "v": "z"}], row_id), [{"id": 1, "v": "x"}, {"id": 2, "v": "z"}]),
    (([], str.lower), []),
]
failed = 0
for args, expected in CASES:
    try:
        got = unique(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"unique{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
