"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys
import unicodedata

sys.path.insert(0, os.getcwd())
from freq import top_words

failed = 0


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{label}: expected {expected!r}, got {got!r}")


def nfc(pairs):
    return [(unicodedata.normalize("NFC", w), c) for w, c in pairs]


DECOMPOSED = unicodedata.normalize("NFD", "café")
expect("reported", lambda: top_words("Café, café… CAFÉ! Tea.", 2), [("café", 3), ("tea", 1)])
expect("plain English", lambda: top_words("the cat and the hat and the bat"), [("the", 3), ("and", 2), ("cat", 1)])
expect("apostrophes inside words", lambda: top_words("Don't, don't: DON'T do it", 2), [("don't", 3), ("do", 1)])
expect("German", lambda: top_words("Grüße und grüße, Über alles über", 2), [("grüße", 2), ("über", 2)])
expect("Polish", lambda: top_words("Łódź łódź Kraków", 2), [("łódź", 2), ("kraków", 1)])
expect("Greek", lambda: top_words("Αθήνα αθήνα ΑΘΉΝΑ και Σπάρτη", 2), [("αθήνα", 3), ("και", 1)])
expect("Russian", lambda: top_words("Москва, москва и Киев", 2), [("москва", 2), ("и", 1)])
expect("Vietnamese", lambda: top_words("Việt Nam việt nam", 2), [("việt", 2), ("nam", 2)])
expect("Japanese words between spaces", lambda: top_words("東京 東京 大阪", 2), [("東京", 2), ("大阪", 1)])
expect("decomposed accents", lambda: nfc(top_words(f"café {DECOMPOSED} {DECOMPOSED.upper()}", 1)), [("café", 3)])
expect("digits and underscores split words", lambda: top_words("abc123def abc_def", 2), [("abc", 2), ("def", 2)])
expect("punctuation only", lambda: top_words("... !!! ---"), [])
expect("n words only", lambda: len(top_words("a b c d e f", 4)), 4)
sys.exit(1 if failed else 0)
