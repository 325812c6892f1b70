"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from acl import Forbidden, check

failed = 0

MAY = {
    "viewer": {"view"},
    "commenter": {"view", "comment"},
    "editor": {"view", "comment", "edit"},
    "admin": {"view", "comment", "edit", "manage_users"},
    "owner": {"view", "comment", "edit", "manage_users", "delete"},
    "auditor": {"view", "export"},
    "lead": {"view", "comment", "edit", "export", "assign"},
}
ACTIONS = sorted(set().union(*MAY.values()))


def may(role, action):
    try:
        check(role, action)
    except Forbidden:
        return False
    return True


for role, actions in MAY.items():
    try:
        got = {action for action in ACTIONS if may(role, action)}
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != actions:
        failed += 1
        print(f"{role} may: expected {sorted(actions)}, got {sorted(got) if isinstance(got, set) else got}")
for role, action in [("nobody", "view"), ("viewer", "delete"), ("admin", "export")]:
    if may(role, action):
        failed += 1
        print(f"{role} may {action}: expected Forbidden")
sys.exit(1 if failed else 0)
