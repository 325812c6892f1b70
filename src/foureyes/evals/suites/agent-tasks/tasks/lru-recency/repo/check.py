"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
import profiles

for user in ["admin", "bob", "admin", "carol", "admin"]:
    profiles.fetch_profile(user)
expected = ["admin", "bob", "carol"]
if profiles.backend_calls != expected:
    print(f"profile service calls: expected {expected!r}, got {profiles.backend_calls!r}")
    sys.exit(1)
