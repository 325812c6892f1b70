"""The reported case (run: python check.py)."""

import os
import sys
import traceback

sys.path.insert(0, os.getcwd())
from chat import receive, send

try:
    got = receive(send(["café", "ok"]))
except Exception:
    traceback.print_exc()
    sys.exit(1)
if got != ["café", "ok"]:
    print(f"expected ['café', 'ok'], got {got!r}")
    sys.exit(1)
