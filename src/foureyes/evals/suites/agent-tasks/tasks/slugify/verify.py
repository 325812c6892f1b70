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
    (('C++ & Rust',), 'c-rust'),
    (('--Already--slugged--',), 'already-slugged'),
    (('UPPER_case',), 'upper-case'),
    (('x',), 'x'),
    (('2024: a year',), '2024-a-year'),
    (('dots.in.title',), 'dots-in-title'),
    (("it's here",), 'it-s-here'),
    (('tab\tand\nnewline',), 'tab-and-newline'),
    (('!!!',), ''),
]
failed = 0
for args, expected in CASES:
    try:
        got = slug(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
