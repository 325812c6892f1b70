"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from pages import pages

CASES = [
    (([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 3), [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]),
    (([0, 1, 2, 3, 4, 5, 6, 7, 8], 3), [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),
    (([], 4), []),
    (([1], 5), [[1]]),
    (([0, 1, 2, 3, 4, 5], 2), [[0, 1], [2, 3], [4, 5]]),
    (([0, 1, 2, 3, 4, 5, 6], 7), [[0, 1, 2, 3, 4, 5, 6]]),
    (([0, 1, 2, 3], 1), [[0], [1], [2], [3]]),
    ((['a', 'b', 'c', 'd', 'e'], 2), [['a', 'b'], ['c', 'd'], ['e']]),
    (([0, 1, 2], 10), [[0, 1, 2]]),
    (([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 5), [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10]]),
    (([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19], 5), [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]),
]
failed = 0
for args, expected in CASES:
    try:
        got = pages(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
