"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from convert import convert

failed = 0
for day, expected in [("2024-05-01", 107.0), ("2024-05-02", 108.0)]:
    got = convert(100, "EUR", "USD", day)
    if got != expected:
        failed += 1
        print(f"convert(100, 'EUR', 'USD', {day!r}): expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
