"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from toc import toc

failed = 0


def expect(label, markdown, expected):
    global failed
    try:
        got = toc(markdown)
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != "\n".join(expected):
        failed += 1
        print(f"{label}: expected {expected!r}, got {got.splitlines() if isinstance(got, str) else got!r}")


def doc(*lines):
    return "\n".join(lines) + "\n"


SETUP = ["- [Setup](#setup)", "  - [Usage](#usage)"]
expect("reported README", doc("# Setup", "", "```bash", "# install the dependencies", "pip install -e .", "```", "", "## Usage"), SETUP)
expect("no code", doc("# A", "## B", "### C"), ["- [A](#a)", "  - [B](#b)", "    - [C](#c)"])
expect("not headings", doc("#hashtag", "####### seven", "# Real", "text # not"), ["- [Real](#real)"])
expect("tilde fence", doc("# Setup", "~~~", "# a comment", "~~~", "## Usage"), SETUP)
expect("tilde fence with a language", doc("# Setup", "~~~python", "# a comment", "~~~", "## Usage"), SETUP)
expect("backticks inside a tilde block", doc("# Setup", "~~~", "```", "# inside", "~~~", "## Usage"), SETUP)
expect("tildes inside a backtick block", doc("# Setup", "```", "~~~", "# inside", "```", "## Usage"), SETUP)
expect("two code blocks", doc("# Setup", "```", "# one", "```", "text", "```sh", "# two", "```", "## Usage"), SETUP)
expect("a longer fence", doc("# Setup", "````", "```", "# inside", "```", "````", "## Usage"), SETUP)
expect("a fence in a list item", doc("# Setup", "- step", "  ```", "  # inside", "  ```", "## Usage"), SETUP)
expect("heading right after a block", doc("```", "# x", "```", "# Setup", "## Usage"), SETUP)
expect("only code", doc("```", "# x", "## y", "```"), [])
expect("anchors", doc("# Hello, World!", "## Step 2: run it"), ["- [Hello, World!](#hello-world)", "  - [Step 2: run it](#step-2-run-it)"])
sys.exit(1 if failed else 0)
