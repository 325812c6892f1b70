"""Stand-ins shared by the store tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from foureyes.config import PrivacyConfig
from foureyes.store import Store


class ManualClock:
    """A wall clock that moves only when the test says so."""

    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


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
