"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from middleware import handle
from views import whoami

first = handle({"user": "alice"}, whoami)
second = handle({}, whoami)
if (first, second) != ("alice", "anonymous"):
    print(f"alice, then an anonymous request: expected ('alice', 'anonymous'), got {(first, second)!r}")
    sys.exit(1)
