"""Stand-ins shared by the store tests."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

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
