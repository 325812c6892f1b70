"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from stats import median

CASES = [
    (([3, 1, 2],), 2),
    (([4, 1, 3, 2],), 2.5),
    (([7],), 7),
    (([5, 5, 1, 9],), 5.0),
    (([1, 2],), 1.5),
    (([5, 3],), 4.0),
    (([1, 1, 1],), 1),
    (([-5, 0, 5, 10],), 2.5),
    (([2.5, 1.5],), 2.0),
    (([9, 1, 8, 2, 7, 3],), 5.0),
    (([100, 1, 50],), 50),
    (([10, 2, 38, 23, 38, 23, 21],), 23),
]
failed = 0
for args, expected in CASES:
    try:
        got = median(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
values = [9, 1, 8, 2]
try:
    median(values)
except Exception:
    pass
if values != [9, 1, 8, 2]:
    failed += 1
    print(f"median reordered the caller's list: {values!r}")
sys.exit(1 if failed else 0)
