"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from invoice import render

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


def line(name, qty, price):
    return {"name": name, "qty": qty, "price": price}


expect("reported invoice", lambda: render([line("mug", 3, "4.35")]), "mug: 3 x 4.35 = 13.05\nTOTAL 13.05")
for price, cents in [
    ("0.29", "0.29"), ("19.99", "19.99"), ("4.35", "4.35"), ("1.10", "1.10"), ("0.5", "0.50"),
    ("7", "7.00"), ("1234.56", "1234.56"), ("0.07", "0.07"), ("9.95", "9.95"),
]:
    expect(f"unit price {price}", lambda price=price: render([line("x", 1, price)]).splitlines()[0], f"x: 1 x {cents} = {cents}")
expect("line amount 0.29 x 7", lambda: render([line("pen", 7, "0.29")]).splitlines()[0], "pen: 7 x 0.29 = 2.03")
expect("line amount 19.99 x 3", lambda: render([line("book", 3, "19.99")]).splitlines()[0], "book: 3 x 19.99 = 59.97")
expect(
    "several lines",
    lambda: render([line("mug", 3, "4.35"), line("pen", 10, "0.29"), line("book", 1, "19.99")]),
    "mug: 3 x 4.35 = 13.05\npen: 10 x 0.29 = 2.90\nbook: 1 x 19.99 = 19.99\nTOTAL 35.94",
)
expect(
    "a credit line",
    lambda: render([line("mug", 2, "4.35"), line("refund", 1, "-4.35")]),
    "mug: 2 x 4.35 = 8.70\nrefund: 1 x -4.35 = -4.35\nTOTAL 4.35",
)
expect("small credit", lambda: render([line("fee", 1, "-0.29")]).splitlines()[-1], "TOTAL -0.29")
expect("many lines", lambda: render([line(f"i{n}", 1, "0.10") for n in range(30)]).splitlines()[-1], "TOTAL 3.00")
expect("empty invoice", lambda: render([]), "TOTAL 0.00")
sys.exit(1 if failed else 0)
