"""The app's start-up refusals (server/app.py's lifespan)."""

from __future__ import annotations

import os

import pytest

from foureyes.config import Config, GateConfig, RolesConfig, RouteConfig, StoreConfig
from foureyes.core.errors import ConfigError
from foureyes.server import create_app
from tests.helpers.server import app_client


def _model_counselor(**gate: bool) -> Config:
    return Config(
        store=StoreConfig(url=os.environ["FOUREYES_STORE__URL"]),
        routes={"flash": RouteConfig(base_url="http://127.0.0.1:9/v1", model="m")},
        roles=RolesConfig(counselor="flash"),
        gate=GateConfig(**gate),
    )


async def test_the_app_refuses_to_start_when_no_second_model_reviews() -> None:
    with pytest.raises(ConfigError) as refused:
        async with app_client(create_app(_model_counselor(), {})):
            pass
    [problem] = refused.value.problems
    assert problem.startswith("roles.supervisor is not mapped to a model")


async def test_the_app_starts_when_the_config_says_so() -> None:
    async with app_client(create_app(_model_counselor(supervisor_unreviewed=True), {})) as client:
        health = await client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["offline_roles"] == [
        "input_checker",
        "primary",
        "reviewer",
        "risk_l1",
        "risk_l2",
        "selector",
        "supervisor",
    ]
