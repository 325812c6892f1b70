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
]
failed = 0
for args, expected in CASES:
    got = delays(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
