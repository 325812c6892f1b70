import context


def nightly_cleanup():
    """The nightly job; it runs between requests."""
    user = context.current_user()
    return f"cleanup as {user}" if user else "cleanup as system"
