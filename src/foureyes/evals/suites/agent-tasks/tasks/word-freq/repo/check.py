"""The reported case (run: python check.py)."""

import os
import sys

sys.path.insert(0, os.getcwd())
from freq import top_words

got = top_words("Café, café… CAFÉ! Tea.", 2)
if got != [("café", 3), ("tea", 1)]:
    print(f"expected [('café', 3), ('tea', 1)], got {got!r}")
    sys.exit(1)
