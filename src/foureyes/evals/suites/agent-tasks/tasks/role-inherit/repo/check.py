"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from acl import Forbidden, check

try:
    check("admin", "comment")
except Forbidden as exc:
    print(f"check('admin', 'comment'): expected no error, got Forbidden: {exc}")
    sys.exit(1)
