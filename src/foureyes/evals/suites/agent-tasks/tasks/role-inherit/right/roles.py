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
    found, todo = set(), [role]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(INHERITS.get(name, []))
    return found
