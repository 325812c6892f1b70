"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from report import daily_counts

events = [
    {"id": 1, "ts": "2024-03-10T12:00:00+00:00"},
    {"id": 2, "ts": "2024-03-10T23:30:00-05:00"},  # 04:30 UTC on the 11th
]
got = daily_counts(events)
if got != {"2024-03-10": 1, "2024-03-11": 1}:
    print(f"expected {{'2024-03-10': 1, '2024-03-11': 1}}, got {got!r}")
    sys.exit(1)
