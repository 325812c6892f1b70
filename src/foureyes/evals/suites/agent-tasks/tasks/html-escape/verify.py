"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys
from html.parser import HTMLParser

sys.path.insert(0, os.getcwd())
from page import comment_html

failed = 0


class _Reader(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


def shown(author, text):
    """What a browser shows: the tags of the comment, its hover title, its text."""
    reader = _Reader()
    reader.feed(comment_html(author, text))
    reader.close()
    return reader.tags, reader.text


def expect(author, text):
    global failed
    want = ([("p", {"class": "comment", "title": author})], text)
    try:
        got = shown(author, text)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != want:
        failed += 1
        print(f"comment_html({author!r}, {text!r}) shows {got!r}, expected {want!r}")


expect("ann", "Write it as Fish &amp; chips")
expect("ann", "Fish & chips")
expect("bo", "I <3 this & more")
expect("bo", "<b>bold?</b>")
expect("cy", "<script>alert(1)</script>")
expect("cy", "a < b > c")
expect("dee", "&lt; is how you write <")
expect("dee", "&&&")
expect("dee", "")
expect('Dan "the man"', "hi")
expect('"><script>x()</script>', "quoted")
expect("O'Neil", "it's fine")
expect("A & B <team>", "both")
expect("zoë", "naïve café ☕")
sys.exit(1 if failed else 0)
