import re


def slug(title):
    """``title`` as a URL slug."""
    return "-".join(re.findall(r"[a-z0-9]+", title.lower()))
