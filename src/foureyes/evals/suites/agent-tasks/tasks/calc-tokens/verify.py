"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from calc import ParseError, calc

failed = 0


def expect(text, expected):
    global failed
    try:
        got = calc(text)
    except ParseError as exc:
        got = f"ParseError: {exc}"
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if expected == "ParseError":
        if isinstance(got, str) and got.startswith("ParseError"):
            return
    elif got == expected and type(got) is type(expected):
        return
    failed += 1
    print(f"calc({text!r}): expected {expected!r}, got {got!r}")


expect("12 + 3", 15)
expect("1 + 2", 3)
expect("100", 100)
expect("  42  ", 42)
expect("007 + 1", 8)
expect("(10 + 20) * 3", 90)
expect("2 * 3 + 4", 10)
expect("2 + 3 * 4", 14)
expect("100 / 8", 12.5)
expect("7 - 10", -3)
expect("10 - 2 - 3", 5)
expect("((12))", 12)
expect("1234567890 + 1", 1234567891)
expect("12*12", 144)
expect("12 3", "ParseError")
expect("1 2 + 3", "ParseError")
expect("(4 5)", "ParseError")
expect("12 +", "ParseError")
expect("(1 + 2", "ParseError")
expect("2 $ 3", "ParseError")
expect("", "ParseError")
sys.exit(1 if failed else 0)
