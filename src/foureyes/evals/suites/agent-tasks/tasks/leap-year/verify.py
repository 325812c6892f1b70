"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from calendar_rules import is_leap

CASES = [
    ((1900,), False),
    ((2024,), True),
    ((2000,), True),
    ((2023,), False),
    ((2400,), True),
]
failed = 0
for args, expected in CASES:
    got = is_leap(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
