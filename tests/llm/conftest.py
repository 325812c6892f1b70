"""The event loops of the HTTP client's tests: asyncio's own and uvloop's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    # uvicorn runs `foureyes serve` on uvloop when it is installed (it is, with
    # uvicorn[standard]); its transports are not asyncio's, so the client is tested on
    # both. Every other test here keeps asyncio's own loop alone.
    if item.path.name == "test_http.py":
        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}
