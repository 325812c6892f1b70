"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from versions import newer

CASES = [
    (('1.10.0', '1.9.0'), True),
    (('1.2.0', '1.3.0'), False),
    (('1.10.0', '1.10'), False),
    (('2', '1.9.9'), True),
    (('1.0', '1'), False),
]
failed = 0
for args, expected in CASES:
    got = newer(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
