"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from pages import pages

CASES = [
    ((list(range(10)), 3), [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]),
    ((list(range(9)), 3), [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),
    (([], 4), []),
    (([1], 5), [[1]]),
]
failed = 0
for args, expected in CASES:
    got = pages(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
