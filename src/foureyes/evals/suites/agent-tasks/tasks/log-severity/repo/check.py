"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from logfilter import filter_logs

CASES = [
    ((['INFO start', 'ERROR disk full'], 'WARNING'), ['ERROR disk full']),
]
failed = 0
for args, expected in CASES:
    got = filter_logs(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
