import re


def slug(title):
    """``title`` as a URL slug."""
    return re.sub(r"[^a-z0-9 ]", "", title.lower()).replace(" ", "-")
