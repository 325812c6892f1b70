"""Counting the work a call does, so that tests bound work instead of wall time.

A wall-clock bound fails on a loaded machine and passes a quadratic loop on a fast one.
:func:`lines_run` counts the Python lines of foureyes' own modules that a call executes:
the same code on the same input always counts the same, whatever else the machine does,
and a loop that grows faster than its input shows up as a count that does too. Work done
in C (a regex, the Aho-Corasick automaton) is not counted; it is linear in its input.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import foureyes

T = TypeVar("T")

_SOURCE = str(Path(foureyes.__file__).parent)


def lines_run(call: Callable[[], T]) -> tuple[T, int]:
    """Run ``call`` and return its result and the number of foureyes lines it executed."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(_SOURCE) else None

    previous = sys.gettrace()
    sys.settrace(global_)
    try:
        result = call()
    finally:
        sys.settrace(previous)
    return result, count
