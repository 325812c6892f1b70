"""Pipeline fixtures: a real SQLite store, one scripted provider for every role, pipelines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from foureyes.config import (
    Config,
    GateConfig,
    PrivacyConfig,
    RiskConfig,
    RolesConfig,
    RouteConfig,
    StoreConfig,
)
from foureyes.llm.routes import Routes
from foureyes.pipeline import SupportPipeline
from foureyes.risk.guardian import GuardianAlerts
from foureyes.risk.l0 import L0Gate
from foureyes.store import Store
from tests.helpers.scripted import ScriptedProvider
from tests.helpers.stores import seed_migrated

MakePipeline = Callable[..., SupportPipeline]

_L0 = L0Gate.default()


def scripted_config(
    *, route_timeout_s: float = 5, risk: dict[str, Any] | None = None, **gate: Any
) -> Config:
    """Every role on the ``scripted`` route; ``[gate]`` and ``[risk]`` as given.

    ``[risk] l1_policy`` is ``escalated`` unless given: these tests script each model call,
    and the ones of a calm message are the Counselor's and the Supervisor's. L1 reading
    every message (the default, ``every``) is tested in test_every_message.py.
    """
    return Config(
        routes={"scripted": RouteConfig(kind="scripted", timeout_s=route_timeout_s)},
        roles=RolesConfig(**{role: "scripted" for role in RolesConfig.model_fields}),
        gate=GateConfig(**gate),
        risk=RiskConfig(**({"l1_policy": "escalated"} | (risk or {}))),
    )


@pytest.fixture
async def store(tmp_path: Path, migrated_sqlite: Path) -> AsyncIterator[Store]:
    seed_migrated(migrated_sqlite, tmp_path / "pipeline.db")
    opened = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 'pipeline.db'}"), PrivacyConfig(), {}
    )
    yield opened
    await opened.close()


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider()


@pytest.fixture
async def make_pipeline(store: Store, scripted: ScriptedProvider) -> AsyncIterator[MakePipeline]:
    """Pipelines over the scripted provider; keywords go to ``scripted_config``."""
    made: list[SupportPipeline] = []

    def make(
        *, alerts: GuardianAlerts | None = None, observer: Any = None, **config: Any
    ) -> SupportPipeline:
        cfg = scripted_config(**config)
        pipeline = SupportPipeline(
            cfg,
            Routes(cfg, {"scripted": scripted}),
            store,
            alerts=alerts,
            l0=_L0,
            observer=observer,
        )
        made.append(pipeline)
        return pipeline

    yield make
    for pipeline in made:
        await pipeline.aclose()
