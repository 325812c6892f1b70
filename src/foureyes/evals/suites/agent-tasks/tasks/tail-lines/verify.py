"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from tail import tail

CASES = [
    ((['a', 'b', 'c', 'd'], 2), ['c', 'd']),
    ((['a', 'b'], 0), []),
    ((['a', 'b'], 5), ['a', 'b']),
    (([], 3), []),
]
failed = 0
for args, expected in CASES:
    got = tail(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
