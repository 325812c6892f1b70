_state = {"user": None}


def set_user(user):
    _state["user"] = user


def current_user():
    """Who the code running now acts for."""
    return _state["user"]
