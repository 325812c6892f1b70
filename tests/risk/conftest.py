"""Risk fixtures: a store under tmp_path, and triages wired to a scripted provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from foureyes.config import Config, PrivacyConfig, StoreConfig
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.risk.l0 import L0Gate, Lexicon
from foureyes.risk.triage import Triage
from foureyes.store import Store
from tests.helpers.clock import ManualClock
from tests.helpers.stores import seed_migrated
from tests.risk._support import (
    ScriptedProvider,
    scripted_config,
    scripted_provider,
    scripted_routes,
)


@pytest.fixture(scope="session")
def gate() -> L0Gate:
    return L0Gate.default()


@pytest.fixture(scope="session")
def lexicon_gate() -> L0Gate:
    """The lexicon alone, without the learned scorer."""
    return L0Gate(Lexicon.packaged())


@pytest.fixture
def store_url(tmp_path: Path, migrated_sqlite: Path) -> str:
    """An SQLite file already at the head revision (the schema is tested in tests/store)."""
    seed_migrated(migrated_sqlite, tmp_path / "risk.db")
    return f"sqlite+aiosqlite:///{tmp_path / 'risk.db'}"


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    s = await Store.open(StoreConfig(url=store_url), PrivacyConfig(), {})
    yield s
    await s.close()


@pytest.fixture
def provider() -> ScriptedProvider:
    return scripted_provider()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


class MakeTriage(Protocol):
    def __call__(
        self,
        on: Store | None = None,
        *,
        route: dict[str, Any] | None = None,
        gate: L0Gate | None = None,
        **risk: Any,
    ) -> Triage: ...


@pytest.fixture
def make_triage(
    store: Store, provider: ScriptedProvider, clock: ManualClock, gate: L0Gate
) -> MakeTriage:
    """A triage over ``store`` (or another), every role on the scripted provider.

    On the session's default ``gate`` (lexicon and learned scorer) unless given another.
    """
    default = gate

    def _make(
        on: Store | None = None,
        *,
        route: dict[str, Any] | None = None,
        gate: L0Gate | None = None,
        **risk: Any,
    ) -> Triage:
        target = on or store
        config = scripted_config(route, **risk)
        caller = ModelCaller(
            scripted_routes(config, provider), ledger=target.ledger, trace=target.traces
        )
        return Triage(config, caller, target.assessments, gate or default, clock=clock)

    return _make


@pytest.fixture
async def offline_triage(store: Store, gate: L0Gate) -> AsyncIterator[Triage]:
    """A triage on the built-in offline routes (no model), over the test's store."""
    config = Config()
    routes = Routes.build(config, {})
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    yield Triage(config, caller, store.assessments, gate)
    await routes.aclose()
