"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from dedupe import unique

CASES = [
    (([3, 3, 1, 2],), [3, 1, 2]),
    (([3, 1, 3, 2],), [3, 1, 2]),
    ((['b', 'a', 'b', 'a'],), ['b', 'a']),
    (([],), []),
]
failed = 0
for args, expected in CASES:
    got = unique(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
