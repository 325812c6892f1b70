import re

_WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ']+")


def words(text):
    """The words of ``text``."""
    return _WORD.findall(text)
