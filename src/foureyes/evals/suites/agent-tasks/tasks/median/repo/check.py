"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from stats import median

CASES = [
    (([3, 1, 2],), 2),
]
failed = 0
for args, expected in CASES:
    got = median(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
