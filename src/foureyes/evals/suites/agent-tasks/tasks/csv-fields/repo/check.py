"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from fields import split_fields

CASES = [
    (('a,"b,c",d',), ['a', 'b,c', 'd']),
]
failed = 0
for args, expected in CASES:
    got = split_fields(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
