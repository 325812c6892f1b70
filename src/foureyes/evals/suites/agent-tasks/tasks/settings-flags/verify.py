"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from features import features

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


def refused(label, thunk, needle):
    global failed
    try:
        got = thunk()
    except ValueError as exc:
        if needle in str(exc):
            return
        got = f"ValueError without {needle!r}: {exc}"
    except Exception as exc:
        got = f"{type(exc).__name__}: {exc}"
    failed += 1
    print(f"{label}: expected a ValueError naming {needle!r}, got {got!r}")


def dark(text):
    return features(text)["dark_mode"]


expect("reported: yes", lambda: dark("dark_mode = yes"), True)
for word, value in [
    ("true", True), ("TRUE", True), ("True", True), ("Yes", True), ("YES", True),
    ("on", True), ("On", True), ("1", True),
    ("false", False), ("False", False), ("no", False), ("NO", False), ("off", False),
    ("OFF", False), ("0", False),
]:
    expect(f"dark_mode = {word}", lambda word=word: dark(f"dark_mode = {word}"), value)
expect("not set: defaults", lambda: features(""), {"dark_mode": False, "beta_search": False, "telemetry": True})
expect("default on, turned off", lambda: features("telemetry = no")["telemetry"], False)
expect("default on, turned off (off)", lambda: features("telemetry = Off")["telemetry"], False)
expect("with a comment", lambda: dark("dark_mode = on  # at night"), True)
expect(
    "a whole file",
    lambda: features("# mine\ndark_mode=YES\nbeta_search = 0\ntelemetry = false\n"),
    {"dark_mode": True, "beta_search": False, "telemetry": False},
)
refused("typo in a default-on setting", lambda: features("telemetry = flase"), "telemetry")
refused("not a boolean", lambda: features("dark_mode = maybe"), "dark_mode")
refused("a number other than 0 and 1", lambda: features("beta_search = 2"), "beta_search")
sys.exit(1 if failed else 0)
