"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from calc import ParseError, calc

try:
    got = calc("12 + 3")
except ParseError as exc:
    got = f"ParseError: {exc}"
if got != 15:
    print(f"calc('12 + 3'): expected 15, got {got!r}")
    sys.exit(1)
