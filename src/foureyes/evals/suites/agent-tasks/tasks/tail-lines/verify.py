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
    (([], 0), []),
    ((['a', 'b', 'c', 'd'], 1), ['d']),
    ((['a', 'b', 'c', 'd'], 4), ['a', 'b', 'c', 'd']),
    ((['a', 'b', 'c', 'd'], 3), ['b', 'c', 'd']),
    ((['only'], 1), ['only']),
    ((['only'], 0), []),
    ((['a', 'b', 'c', 'd', 'e', 'f'], 5), ['b', 'c', 'd', 'e', 'f']),
]
failed = 0
for args, expected in CASES:
    try:
        got = tail(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
