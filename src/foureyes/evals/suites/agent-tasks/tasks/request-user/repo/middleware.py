import context


def handle(request, view):
    """Run ``view`` for ``request`` (a dict; "user" names the logged-in user, if any)."""
    if request.get("user"):
        context.set_user(request["user"])
    return view(request)
