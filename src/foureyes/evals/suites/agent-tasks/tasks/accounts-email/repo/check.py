"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from accounts import Accounts

accounts = Accounts()
accounts.sign_up("alice@example.com", "Alice")
try:
    got = accounts.log_in("Alice@Example.com")
except LookupError as exc:
    got = f"LookupError: {exc}"
if got != "Alice":
    print(f"log_in('Alice@Example.com'): expected 'Alice', got {got!r}")
    sys.exit(1)
