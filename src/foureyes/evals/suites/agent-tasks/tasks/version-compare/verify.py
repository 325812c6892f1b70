"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from versions import newer

CASES = [
    (('1.10.0', '1.9.0'), True),
    (('1.2.0', '1.3.0'), False),
    (('1.10.0', '1.10'), False),
    (('1.10', '1.10.0'), False),
    (('2', '1.9.9'), True),
    (('1.0', '1'), False),
    (('1', '1.0'), False),
    (('1.0.1', '1'), True),
    (('1', '1.0.1'), False),
    (('1.2', '1.10'), False),
    (('10.0', '9.99'), True),
    (('1.2.3', '1.2.3'), False),
    (('0.0.1', '0.0.0'), True),
    (('1.01', '1.1'), False),
    (('3.0.0.1', '3'), True),
    (('1.9.0', '1.10.0'), False),
    (('2.0.0', '10.0.0'), False),
]
failed = 0
for args, expected in CASES:
    try:
        got = newer(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
