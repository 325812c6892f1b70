"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from versions import newer

CASES = [
    (('1.10.0', '1.9.0'), True),
    (('1.2.0', '1.3.0'), False),
]
failed = 0
for args, expected in CASES:
    got = newer(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
