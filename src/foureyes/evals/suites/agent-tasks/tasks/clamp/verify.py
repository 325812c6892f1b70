"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from clamp import clamp

CASES = [
    ((15, 0, 10), 10),
    ((5, 0, 10), 5),
    ((-5, 0, 10), 0),
    ((0, 0, 10), 0),
]
failed = 0
for args, expected in CASES:
    got = clamp(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
