from roles import expand

# What each role may do itself; the roles it inherits add theirs.
# A role that lacks a permission it should have: add it to its row here.
PERMISSIONS = {
    "viewer": {"view"},
    "commenter": {"comment"},
    "editor": {"edit"},
    "admin": {"manage_users", "comment"},
    "owner": {"delete"},
    "auditor": {"export"},
    "lead": {"assign"},
}


class Forbidden(Exception):
    pass


def allowed(role):
    """Everything ``role`` may do."""
    actions = set()
    for name in expand(role):
        actions |= PERMISSIONS.get(name, set())
    return actions


def check(role, action):
    """Raise Forbidden unless ``role`` may do ``action``."""
    if action not in allowed(role):
        raise Forbidden(f"role {role!r} lacks {action!r}: add it to PERMISSIONS in acl.py")
