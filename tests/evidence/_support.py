"""Shared pieces of the evidence tests: the body-state example and reading the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import Config, RouteConfig
from foureyes.evidence import Catalog, KindRegistry, catalog_from_json

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "body_state"
CATALOG_FILE = EXAMPLE / "catalog.json"
KINDS_FILE = EXAMPLE / "kinds.toml"
SMUGGLED = "说明训练量不足"
"""The prose the seed's hostile selector tries to write as a fact."""


def example_catalog() -> Catalog:
    return catalog_from_json(CATALOG_FILE.read_text(encoding="utf-8"))


def example_kinds() -> KindRegistry:
    return KindRegistry.from_file(KINDS_FILE)


def example_document() -> dict[str, Any]:
    return dict(json.loads(CATALOG_FILE.read_text(encoding="utf-8")))


def selector_config(route: RouteConfig) -> Config:
    """A config whose selector role is served by ``route``."""
    return Config(routes={"sim": route}, roles={"selector": "sim"})  # type: ignore[arg-type]


async def observation_rows(url: str) -> list[dict[str, Any]]:
    """Every row of the observations table, read straight from the database."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            result = await conn.execute(text("SELECT * FROM observations ORDER BY id"))
            return [dict(row._mapping) for row in result]
    finally:
        await engine.dispose()
