import re


def anchor(title):
    """The anchor of the heading ``title``."""
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
