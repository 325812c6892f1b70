"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from logfilter import filter_logs

CASES = [
    ((['INFO start', 'ERROR disk full'], 'WARNING'), ['ERROR disk full']),
    ((['WARNING low disk', 'INFO ok'], 'WARNING'), ['WARNING low disk']),
    ((['CRITICAL down', 'DEBUG x', 'ERROR e'], 'ERROR'), ['CRITICAL down', 'ERROR e']),
    ((['DEBUG x'], 'DEBUG'), ['DEBUG x']),
    ((['WARNING w', 'ERROR e'], 'ERROR'), ['ERROR e']),
    ((['DEBUG d', 'INFO i', 'WARNING w', 'ERROR e', 'CRITICAL c'], 'DEBUG'), ['DEBUG d', 'INFO i', 'WARNING w', 'ERROR e', 'CRITICAL c']),
    ((['DEBUG d', 'INFO i', 'WARNING w', 'ERROR e', 'CRITICAL c'], 'INFO'), ['INFO i', 'WARNING w', 'ERROR e', 'CRITICAL c']),
    ((['DEBUG d', 'INFO i', 'WARNING w', 'ERROR e', 'CRITICAL c'], 'CRITICAL'), ['CRITICAL c']),
    ((['INFO a', 'INFO b'], 'WARNING'), []),
    (([], 'INFO'), []),
    ((['ERROR 1', 'WARNING 2', 'ERROR 3'], 'WARNING'), ['ERROR 1', 'WARNING 2', 'ERROR 3']),
    ((['INFO user logged in as ERROR', 'DEBUG cache hit'], 'INFO'), ['INFO user logged in as ERROR']),
    ((['CRITICAL c', 'ERROR e'], 'CRITICAL'), ['CRITICAL c']),
]
failed = 0
for args, expected in CASES:
    try:
        got = filter_logs(*args)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{args!r}: expected {expected!r}, got {got!r}")
sys.exit(1 if failed else 0)
