"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from backoff import delays

CASES = [
    ((4, 1, 60), [1, 2, 4, 8]),
    ((7, 1, 30), [1, 2, 4, 8, 16, 30, 30]),
    ((3, 5, 12), [5, 10, 12]),
    ((0, 1, 10), []),
    ((5, 2, 100), [2, 4, 8, 16, 32]),
    ((6, 3, 50), [3, 6, 12, 24, 48, 50]),
    ((1, 7, 5), [5]),
    ((4, 0.5, 3), [0.5, 1.0, 2.0, 3]),
    ((3, 10, 10), [10, 10, 10]),
    ((10, 1, 1000), [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]),
    ((2, 1, 1), [1, 1]),
    ((1, 1, 60), [1]),
]
failed = 0
for args, expected in CASES:
    try:
        got = delays(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
