"""The reported case (run: python check.py): people.txt is the export attached to the issue."""

import os
import sys
import traceback

sys.path.insert(0, os.getcwd())
from report import mailing_list

expected = ["Ada Lovelace <ada@example.com>", "Grace Hopper <grace@example.com>"]
try:
    got = mailing_list("people.txt")
except Exception:
    traceback.print_exc()
    sys.exit(1)
if got != expected:
    print(f"expected {expected!r}, got {got!r}")
    sys.exit(1)
