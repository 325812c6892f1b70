"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from fields import split_fields

CASES = [
    (('a,"b,c",d',), ['a', 'b,c', 'd']),
    (('"say ""hi""",x',), ['say "hi"', 'x']),
    (('one',), ['one']),
    (('a,,b',), ['a', '', 'b']),
    (('"a"',), ['a']),
    ((',',), ['', '']),
    (('a,',), ['a', '']),
    (('"x,y",',), ['x,y', '']),
    (('"",b',), ['', 'b']),
    (('a b, c',), ['a b', ' c']),
    (('"multi ""q"" ,"',), ['multi "q" ,']),
    (('1,2,3,4,5',), ['1', '2', '3', '4', '5']),
    (('"""quoted"""',), ['"quoted"']),
    (('x,"",y',), ['x', '', 'y']),
]
failed = 0
for args, expected in CASES:
    try:
        got = split_fields(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
