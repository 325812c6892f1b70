from memo import memoize

backend_calls = []


@memoize(2)
def fetch_profile(user):
    """The profile of ``user``, from the (slow) profile service."""
    backend_calls.append(user)
    return {"user": user, "name": user.title()}
