"""The reported case (run: python check.py): 45 results, 10 per page."""

import os
import sys

sys.path.insert(0, os.getcwd())
from links import nav
from paging import page_items

failed = 0
got = nav(4, 45, 10)["next"]
if got != 5:
    failed += 1
    print(f"nav(4, 45, 10)['next']: expected 5, got {got!r}")
try:
    got = page_items(list(range(1, 46)), 5, 10)
except LookupError as exc:
    got = f"LookupError: {exc}"
if got != [41, 42, 43, 44, 45]:
    failed += 1
    print(f"page 5: expected [41, 42, 43, 44, 45], got {got!r}")
sys.exit(1 if failed else 0)
