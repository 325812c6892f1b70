import re

_WORD = re.compile(r"[A-Za-z']+")


def words(text):
    """The words of ``text``."""
    return _WORD.findall(text)
