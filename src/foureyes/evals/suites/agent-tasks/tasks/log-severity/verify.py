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
]
failed = 0
for args, expected in CASES:
    got = filter_logs(*args)
    if got != expected:
        failed += 1
        print(f'{args!r}: expected {expected!r}, got {got!r}')
sys.exit(1 if failed else 0)
