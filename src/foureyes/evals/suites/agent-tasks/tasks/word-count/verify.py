"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from words import count_words

CASES = [
    (('two  spaces',), 2),
    (('tab\tand\nnewline',), 3),
    (('',), 0),
    (('  padded  ',), 1),
]
failed = 0
for args, expected in CASES:
    got = count_words(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
