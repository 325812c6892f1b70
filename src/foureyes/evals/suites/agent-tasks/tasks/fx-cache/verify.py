"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
import source
from convert import convert

failed = 0


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{label}: expected {expected!r}, got {got!r}")


D1, D2, D3 = "2024-05-01", "2024-05-02", "2024-05-03"
expect("reported: day 1", lambda: convert(100, "EUR", "USD", D1), 107.0)
expect("reported: day 2", lambda: convert(100, "EUR", "USD", D2), 108.0)
expect("back to day 1", lambda: convert(100, "EUR", "USD", D1), 107.0)
expect("day 3", lambda: convert(200, "EUR", "USD", D3), 215.0)
expect("another pair, day 2", lambda: convert(10, "GBP", "USD", D2), 12.6)
expect("another pair, day 1", lambda: convert(10, "GBP", "USD", D1), 12.5)
expect("third pair", lambda: convert(1000, "EUR", "GBP", D3), 860.0)
expect("third pair, day 1", lambda: convert(1000, "EUR", "GBP", D1), 855.0)
expect("to the cent", lambda: convert(3.33, "EUR", "USD", D3), 3.58)
expect("again, alternating", lambda: [convert(100, "EUR", "USD", d) for d in (D2, D1, D2, D3, D1)], [108.0, 107.0, 108.0, 107.5, 107.0])
expect("again, another pair", lambda: [convert(100, "GBP", "USD", d) for d in (D1, D2, D3, D3)], [125.0, 126.0, 125.5, 125.5])
expect("each pair and day fetched once", lambda: sorted(source.calls), sorted(set(source.calls)))
expect(
    "everything that was needed fetched",
    lambda: sorted(set(source.calls)),
    sorted(
        [("EUR", "USD", d) for d in (D1, D2, D3)]
        + [("GBP", "USD", d) for d in (D1, D2, D3)]
        + [("EUR", "GBP", D1), ("EUR", "GBP", D3)]
    ),
)
sys.exit(1 if failed else 0)
