"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from page import comment_html

expected = '<p class="comment" title="ann">Write it as Fish &amp;amp; chips</p>'
got = comment_html("ann", "Write it as Fish &amp; chips")
if got != expected:
    print(f"expected {expected!r}\n     got {got!r}")
    sys.exit(1)
