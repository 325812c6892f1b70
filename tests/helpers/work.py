"""Counting the work a call does, so that tests bound work instead of wall time.

A wall-clock bound fails on a loaded machine and passes a quadratic loop on a fast one.
:func:`lines_run` (:func:`lines_run_async` for a coroutine) counts the Python lines of
foureyes' own modules that a call executes: the same code on the same input always counts
the same, whatever else the machine does, and a loop that grows faster than its input
shows up as a count that does too. Work done
in C (a regex, the Aho-Corasick automaton) is not counted; it is linear in its input.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import foureyes

T = TypeVar("T")

_SOURCE = str(Path(foureyes.__file__).parent)


class _LineCounter:
    """Counts the foureyes lines this thread runs between :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.count += 1
        return self._local

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._local if frame.f_code.co_filename.startswith(_SOURCE) else None

    def start(self) -> None:
        self._previous = sys.gettrace()
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(self._previous)


def lines_run(call: Callable[[], T]) -> tuple[T, int]:
    """Run ``call`` and return its result and the number of foureyes lines it executed."""
    counter = _LineCounter()
    counter.start()
    try:
        result = call()
    finally:
        counter.stop()
    return result, counter.count


async def lines_run_async(call: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """Await ``call()`` and return its result and the foureyes lines run on this thread.

    Every task of the event loop runs on this thread, so nothing else may run meanwhile;
    work handed to other threads (the SQLite writer, ``asyncio.to_thread``) and to other
    processes (the simulator) is not counted.
    """
    counter = _LineCounter()
    counter.start()
    try:
        result = await call()
    finally:
        counter.stop()
    return result, counter.count
