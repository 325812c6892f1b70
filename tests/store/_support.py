"""Stand-ins shared by the store tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any, Protocol, TypeVar

import pytest

from foureyes.config import PrivacyConfig
from foureyes.store import Store


class OpenStore(Protocol):
    """The ``open_store`` fixture: ``Store.open`` from a URL, closed after the test."""

    def __call__(
        self,
        url: str,
        *,
        privacy: PrivacyConfig | None = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Awaitable[Store]: ...


def begin_and_end(queries: list[str]) -> list[str]:
    """The transaction statements among ``queries`` (the ``postgres_queries`` fixture's)."""
    words = [query.strip().rstrip(";").split(" ", 1)[0].upper() for query in queries]
    return [word for word in words if word in ("BEGIN", "COMMIT", "ROLLBACK")]


async def cancel_under_way(write: Coroutine[Any, Any, Any]) -> None:
    """Start ``write``, cancel its caller once it is in the write path, see it cancelled.

    The write is then queued or running: on SQLite on the writer thread, on PostgreSQL
    sent to the server, so it runs to its end whatever its caller does.
    """
    task = asyncio.ensure_future(write)
    for _ in range(3):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


_T = TypeVar("_T")


async def without_a_turn(write: Awaitable[_T]) -> tuple[_T, bool]:
    """``write``'s value, and whether it returned before the event loop's next turn.

    A callback scheduled just before ``write`` is awaited runs on the loop's next turn;
    if it has not run when ``write`` returns, nothing in ``write`` waited for the loop.
    """
    turned: list[bool] = []
    asyncio.get_running_loop().call_soon(turned.append, True)
    value = await write
    return value, not turned
