INHERITS = {
    "viewer": [],
    "commenter": ["viewer"],
    "editor": ["commenter"],
    "admin": ["editor"],
    "owner": ["admin"],
    "auditor": ["viewer"],
    "lead": ["editor", "auditor"],
}
"""The roles each role inherits."""


def expand(role):
    """``role`` and the roles it inherits."""
    return {role, *INHERITS.get(role, [])}
