def slug(title):
    """``title`` as a URL slug."""
    return title.lower().replace(" ", "-")
