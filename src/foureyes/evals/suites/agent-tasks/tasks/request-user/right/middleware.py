import context


def handle(request, view):
    """Run ``view`` for ``request`` (a dict; "user" names the logged-in user, if any)."""
    before = context.current_user()
    context.set_user(request.get("user"))
    try:
        return view(request)
    finally:
        context.set_user(before)
