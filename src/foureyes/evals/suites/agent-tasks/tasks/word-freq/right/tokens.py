import re
import unicodedata

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def words(text):
    """The words of ``text``."""
    return _WORD.findall(unicodedata.normalize("NFC", text))
