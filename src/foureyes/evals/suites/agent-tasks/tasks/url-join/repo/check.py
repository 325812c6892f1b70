"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from client import Client

got = Client("https://api.example.com/v1/").url("users", 42)
if got != "https://api.example.com/v1/users/42":
    print(f"expected 'https://api.example.com/v1/users/42', got {got!r}")
    sys.exit(1)
