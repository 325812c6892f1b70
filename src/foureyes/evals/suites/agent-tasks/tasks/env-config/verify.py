"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from config import load_config
from server import listen_address
from worker import pool_plan

failed = 0


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected or type(got) is not type(expected):
        failed += 1
        print(f"{label}: expected {expected!r}, got {got!r}")


def typed(value):
    """``value`` with the type of each part, so that 1 and True and '1' differ."""
    if isinstance(value, dict):
        return {k: (type(v).__name__, v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple((type(v).__name__, v) for v in value)
    return (type(value).__name__, value)


def refused(label, environ, needle):
    global failed
    try:
        got = (load_config(environ), listen_address(environ), pool_plan(environ))
    except ValueError as exc:
        if needle in str(exc):
            return
        got = f"ValueError without {needle!r}: {exc}"
    except Exception as exc:
        got = f"{type(exc).__name__}: {exc}"
    failed += 1
    print(f"{label}: expected a ValueError naming {needle}, got {got!r}")


PLAN = {"workers": 2, "debug": False, "timeout": 30.0}
expect("reported: APP_PORT", lambda: typed(listen_address({"APP_PORT": "9000"})), typed(("127.0.0.1", 9000, 9001)))
expect("nothing set", lambda: typed(listen_address({})), typed(("127.0.0.1", 8000, 8001)))
expect("port in the config", lambda: typed(load_config({"APP_PORT": "9000"})["port"]), typed(9000))
expect("host", lambda: typed(listen_address({"APP_HOST": "0.0.0.0", "APP_PORT": "80"})), typed(("0.0.0.0", 80, 81)))
expect("workers", lambda: typed(pool_plan({"APP_WORKERS": "8"})), typed(PLAN | {"workers": 8}))
expect("timeout", lambda: typed(pool_plan({"APP_TIMEOUT": "2.5"})), typed(PLAN | {"timeout": 2.5}))
expect("whole-number timeout", lambda: typed(pool_plan({"APP_TIMEOUT": "10"})), typed(PLAN | {"timeout": 10.0}))
for word, value in [("true", True), ("1", True), ("YES", True), ("On", True), ("false", False), ("0", False), ("no", False), ("OFF", False)]:
    expect(f"APP_DEBUG={word}", lambda word=word: typed(pool_plan({"APP_DEBUG": word})), typed(PLAN | {"debug": value}))
expect("nothing set: plan", lambda: typed(pool_plan({})), typed(PLAN))
expect("all at once", lambda: typed(load_config({"APP_PORT": "81", "APP_WORKERS": "3", "APP_DEBUG": "yes", "APP_TIMEOUT": "1.5", "APP_HOST": "h"})), typed({"host": "h", "port": 81, "workers": 3, "debug": True, "timeout": 1.5}))
expect("other variables ignored", lambda: typed(load_config({"PORT": "1", "APP_OTHER": "x"})), typed({"host": "127.0.0.1", "port": 8000, "workers": 2, "debug": False, "timeout": 30.0}))
refused("a port that is no number", {"APP_PORT": "eighty"}, "APP_PORT")
refused("workers that are no number", {"APP_WORKERS": "many"}, "APP_WORKERS")
refused("debug that is no boolean", {"APP_DEBUG": "maybe"}, "APP_DEBUG")
sys.exit(1 if failed else 0)
