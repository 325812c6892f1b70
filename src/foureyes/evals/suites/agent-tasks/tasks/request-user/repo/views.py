import context


def whoami(request):
    return context.current_user() or "anonymous"


def delete_account(request):
    user = context.current_user()
    if user is None:
        raise PermissionError("log in first")
    return f"deleted the account of {user}"


def crash(request):
    raise RuntimeError("the view failed")
