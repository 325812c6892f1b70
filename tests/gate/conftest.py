"""Gate fixtures: a real SQLite store, a scripted provider, and runners wired to both."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from foureyes.config import Config, GateConfig, PrivacyConfig, RolesConfig, RouteConfig, StoreConfig
from foureyes.core.deadline import Clock
from foureyes.core.trace import TraceWriter
from foureyes.gate import GateRunner
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.store import Store
from foureyes.store.unknowns import SqlOpenUnknowns
from tests.helpers.scripted import ScriptedProvider
from tests.helpers.stores import seed_migrated

MakeRunner = Callable[..., GateRunner]


def scripted_config(*, route_timeout_s: float = 5, **gate: Any) -> Config:
    """Counselor and Supervisor on the ``scripted`` route, ``[gate]`` as given."""
    return Config(
        routes={"scripted": RouteConfig(kind="scripted", timeout_s=route_timeout_s)},
        roles=RolesConfig(counselor="scripted", supervisor="scripted"),
        gate=GateConfig(**gate),
    )


@pytest.fixture
def privacy() -> PrivacyConfig:
    """Model-written text kept, so traces and the unknowns' ``text`` hold it too.

    A test parametrizes ``privacy`` to see the gate under another setting.
    """
    return PrivacyConfig(store_raw_text=True)


@pytest.fixture
async def store(
    tmp_path: Path, privacy: PrivacyConfig, migrated_sqlite: Path
) -> AsyncIterator[Store]:
    seed_migrated(migrated_sqlite, tmp_path / "gate.db")
    opened = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 'gate.db'}"), privacy, {}
    )
    yield opened
    await opened.close()


@pytest.fixture
def unknowns(store: Store) -> SqlOpenUnknowns:
    return store.unknowns


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider()


@pytest.fixture
def make_runner(store: Store, scripted: ScriptedProvider, unknowns: SqlOpenUnknowns) -> MakeRunner:
    """A runner over the scripted provider; keyword arguments go to ``GateConfig``."""

    def make(
        *,
        traces: TraceWriter | None = None,
        clock: Clock | None = None,
        keep_unknowns: bool = True,
        route_timeout_s: float = 5,
        **gate: Any,
    ) -> GateRunner:
        config = scripted_config(route_timeout_s=route_timeout_s, **gate)
        caller = ModelCaller(
            Routes(config, {"scripted": scripted}), ledger=store.ledger, trace=store.traces
        )
        options: dict[str, Any] = {} if clock is None else {"clock": clock}
        return GateRunner(
            caller,
            traces=traces or store.traces,
            unknowns=unknowns if keep_unknowns else None,
            **options,
        )

    return make
