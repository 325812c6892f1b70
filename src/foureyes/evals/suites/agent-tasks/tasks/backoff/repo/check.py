"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from backoff import delays

CASES = [
    ((4, 1, 60), [1, 2, 4, 8]),
]
failed = 0
for args, expected in CASES:
    got = delays(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
