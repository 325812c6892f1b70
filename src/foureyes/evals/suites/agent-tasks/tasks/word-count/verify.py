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
    (('one',), 1),
    (('a b c',), 3),
    ((' \t\n ',), 0),
    (('line one\nline two\n',), 4),
    (('non\xa0breaking space',), 3),
    (('x\r\ny',), 2),
    (('many    spaces   here',), 3),
    (("it's fine",), 2),
    (('émigré café',), 2),
    (('a\n\n\nb',), 2),
]
failed = 0
for args, expected in CASES:
    try:
        got = count_words(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
