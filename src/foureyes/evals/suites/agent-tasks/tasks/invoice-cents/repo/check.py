"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from invoice import render

text = render([{"name": "mug", "qty": 3, "price": "4.35"}])
last = text.splitlines()[-1]
if last != "TOTAL 13.05":
    print(f"total line: expected 'TOTAL 13.05', got {last!r}")
    sys.exit(1)
