"""A pytest plugin for stress runs: it stalls the test process's event loops now and then.

Loaded only by ``scripts/stress.py`` (``-p tests.helpers.stall``), never by the default
run. A loaded machine stalls a test worker in ways no test can schedule: a full garbage
collection of a large heap, the scheduler giving the CPU to the other worker's browser or
database. This makes such stalls frequent: every ``FOUREYES_STALL_EVERY_S`` seconds of
wall time (default 1.5) one turn of whichever event loop is running first blocks for
``FOUREYES_STALL_S`` seconds (default 0.6), with neither callbacks nor I/O handled
meanwhile. A test that only passes when its process is never paused fails under it.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest

_last = time.monotonic()


def pytest_configure(config: pytest.Config) -> None:
    every_s = float(os.environ.get("FOUREYES_STALL_EVERY_S", "1.5"))
    stall_s = float(os.environ.get("FOUREYES_STALL_S", "0.6"))
    run_once = asyncio.BaseEventLoop._run_once  # type: ignore[attr-defined]

    def stalling_run_once(loop: Any) -> None:
        global _last
        now = time.monotonic()
        if now - _last >= every_s:
            time.sleep(stall_s)
            _last = time.monotonic()
        run_once(loop)

    asyncio.BaseEventLoop._run_once = stalling_run_once  # type: ignore[attr-defined]
    config.add_cleanup(lambda: setattr(asyncio.BaseEventLoop, "_run_once", run_once))
