"""The reported case (run: python check.py): APP_PORT=9000 in the environment."""

import os
import sys
import traceback

sys.path.insert(0, os.getcwd())
from server import listen_address

try:
    got = listen_address({"APP_PORT": "9000"})
except Exception:
    traceback.print_exc()
    sys.exit(1)
if got != ("127.0.0.1", 9000, 9001):
    print(f"expected ('127.0.0.1', 9000, 9001), got {got!r}")
    sys.exit(1)
