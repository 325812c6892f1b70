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
    ((10, 0, 10), 10),
    ((3, 5, 10), 5),
    ((7, 5, 10), 7),
    ((12, 5, 10), 10),
    ((-20, -10, -5), -10),
    ((-1, -10, -5), -5),
    ((-7, -10, -5), -7),
    ((0.5, 1.0, 2.0), 1.0),
    ((2.5, 1.0, 2.0), 2.0),
    ((1.5, 1.0, 2.0), 1.5),
    ((4, 4, 4), 4),
    ((100, 20, 30), 30),
    ((19, 20, 30), 20),
    ((25, 20, 30), 25),
]
failed = 0
for args, expected in CASES:
    try:
        got = clamp(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
