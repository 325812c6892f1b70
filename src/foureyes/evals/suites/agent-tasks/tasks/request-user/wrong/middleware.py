import context


def handle(request, view):
    """Run ``view`` for ``request`` (a dict; "user" names the logged-in user, if any)."""
    context.set_user(request.get("user"))
    return view(request)
