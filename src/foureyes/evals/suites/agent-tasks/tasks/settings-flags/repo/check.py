"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from features import features

got = features("dark_mode = yes\n")["dark_mode"]
if got is not True:
    print(f"dark_mode = yes: expected True, got {got!r}")
    sys.exit(1)
