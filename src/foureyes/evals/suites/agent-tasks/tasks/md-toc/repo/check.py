"""The reported case (run: python check.py): the start of our README."""

import os
import sys

sys.path.insert(0, os.getcwd())
from toc import toc

README = """# Setup

Install it first:

```bash
# install the dependencies
pip install -e .
```

## Usage

Run `tool --help`.
"""

got = toc(README)
expected = "- [Setup](#setup)\n  - [Usage](#usage)"
if got != expected:
    print(f"expected:\n{expected}\ngot:\n{got}")
    sys.exit(1)
