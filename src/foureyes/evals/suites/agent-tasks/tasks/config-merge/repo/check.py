"""The reported case (run: python check.py): Alice's settings, then Bob's."""

import os
import sys

sys.path.insert(0, os.getcwd())
from loader import load_settings

alice = load_settings('{"theme": "dark"}')
bob = load_settings("{}")
if bob["theme"] != "light":
    print(f"Bob's theme: expected 'light', got {bob['theme']!r}")
    sys.exit(1)
