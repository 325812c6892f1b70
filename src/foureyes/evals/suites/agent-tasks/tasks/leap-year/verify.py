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
    ((1600,), True),
    ((1700,), False),
    ((1800,), False),
    ((2100,), False),
    ((2200,), False),
    ((2300,), False),
    ((2500,), False),
    ((1996,), True),
    ((2004,), True),
    ((2020,), True),
    ((1999,), False),
    ((2001,), False),
    ((2019,), False),
    ((4,), True),
    ((100,), False),
    ((400,), True),
    ((1,), False),
    ((2800,), True),
    ((3000,), False),
]
failed = 0
for args, expected in CASES:
    try:
        got = is_leap(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
