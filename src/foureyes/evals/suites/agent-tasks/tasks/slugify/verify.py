"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from slug import slug

CASES = [
    (('Hello, World!',), 'hello-world'),
    (('  Many   spaces ',), 'many-spaces'),
    (('a - b',), 'a-b'),
    (('Top 10',), 'top-10'),
]
failed = 0
for args, expected in CASES:
    got = slug(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
