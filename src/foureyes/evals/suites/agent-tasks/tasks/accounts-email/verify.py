"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from accounts import Accounts
from invites import Invites

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


def signed(*people):
    accounts = Accounts()
    for email, name in people:
        accounts.sign_up(email, name)
    return accounts


def refused_twice(first, second):
    accounts = signed((first, "One"))
    try:
        accounts.sign_up(second, "Two")
    except ValueError:
        return "refused"
    return "accepted"


def invites(accounts, *emails):
    sender = Invites(accounts)
    return [sender.invite(email) for email in emails]


expect("reported login", lambda: signed(("alice@example.com", "Alice")).log_in("Alice@Example.com"), "Alice")
expect("same spelling", lambda: signed(("alice@example.com", "Alice")).log_in("alice@example.com"), "Alice")
expect("signed up capitalised, logs in lower case", lambda: signed(("Bob@Example.com", "Bob")).log_in("bob@example.com"), "Bob")
expect("signed up capitalised, same spelling", lambda: signed(("Bob@Example.com", "Bob")).log_in("Bob@Example.com"), "Bob")
expect("upper case login", lambda: signed(("carol@example.com", "Carol")).log_in("CAROL@EXAMPLE.COM"), "Carol")
expect("spaces around", lambda: signed((" dan@example.com ", "Dan")).log_in("Dan@example.com  "), "Dan")
expect("has() ignores case", lambda: signed(("Eve@Example.com", "Eve")).has("eve@EXAMPLE.com"), True)
expect("another person", lambda: signed(("alice@example.com", "Alice")).has("alicia@example.com"), False)
expect("sign up twice, other case", lambda: refused_twice("frank@example.com", "Frank@Example.COM"), "refused")
expect("sign up twice, capitalised first", lambda: refused_twice("Gina@Example.com", "gina@example.com"), "refused")
expect("two people", lambda: [signed(("a@x.io", "A"), ("B@x.io", "B")).log_in(e) for e in ("A@X.IO", "b@x.io")], ["A", "B"])
expect("invite once, whatever the spelling", lambda: invites(Accounts(), "hal@example.com", "Hal@Example.com", " HAL@example.com"), [True, False, False])
expect("no invitation to an account", lambda: invites(signed(("Ivy@Example.com", "Ivy")), "ivy@example.com", "IVY@EXAMPLE.COM"), [False, False])
expect("invite others", lambda: invites(signed(("ivy@example.com", "Ivy")), "jo@example.com", "kim@example.com"), [True, True])
sys.exit(1 if failed else 0)
