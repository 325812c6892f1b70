"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from jobs import nightly_cleanup
from middleware import handle
from views import crash, delete_account, whoami

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


def answer(request, view):
    try:
        return handle(request, view)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def nested(request):
    """A view that answers an internal sub-request made without a user."""
    inner = handle({}, whoami)
    return f"{whoami(request)}/{inner}/{whoami(request)}"


ALICE, BOB, ANON = {"user": "alice"}, {"user": "bob"}, {}
expect("reported", lambda: [answer(ALICE, whoami), answer(ANON, whoami)], ["alice", "anonymous"])
expect("each their own", lambda: [answer(r, whoami) for r in (ALICE, BOB, ANON, BOB)], ["alice", "bob", "anonymous", "bob"])
expect("an empty user is nobody", lambda: [answer(ALICE, whoami), answer({"user": ""}, whoami)], ["alice", "anonymous"])
expect("anonymous may not delete", lambda: [answer(BOB, whoami), answer(ANON, delete_account)], ["bob", "PermissionError: log in first"])
expect("the job after a request", lambda: (answer(ALICE, whoami), nightly_cleanup()), ("alice", "cleanup as system"))
expect("the job after a failed request", lambda: (answer(BOB, crash), nightly_cleanup()), ("RuntimeError: the view failed", "cleanup as system"))
expect("anonymous after a failed request", lambda: (answer(BOB, crash), answer(ANON, whoami)), ("RuntimeError: the view failed", "anonymous"))
expect("the job after a refused request", lambda: (answer(ANON, delete_account), nightly_cleanup()), ("PermissionError: log in first", "cleanup as system"))
expect("the job with no request yet", lambda: nightly_cleanup(), "cleanup as system")
expect("a sub-request", lambda: (answer(ALICE, nested), nightly_cleanup()), ("alice/anonymous/alice", "cleanup as system"))
expect("delete as oneself", lambda: answer(ALICE, delete_account), "deleted the account of alice")
sys.exit(1 if failed else 0)
