"""Shared pieces of the eval tests: a config with a second offline route, and a store."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from foureyes.config import Config
from foureyes.store import Store


def eval_config(tmp_path: Path, **routes: dict[str, Any]) -> Config:
    """Offline defaults plus an offline route ``strong`` and any ``routes`` given."""
    return Config.model_validate(
        {
            "store": {"url": f"sqlite+aiosqlite:///{tmp_path}/eval.db"},
            "routes": {"strong": {"kind": "offline"}, **routes},
        }
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    """A real SQLite store under ``tmp_path``."""
    cfg = eval_config(tmp_path)
    opened = await Store.open(cfg.store, cfg.privacy, {})
    try:
        yield opened
    finally:
        await opened.close()


def write_suite(folder: Path, head: dict[str, Any], cases: list[Any]) -> Path:
    """Write a suite folder and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.json").write_text(json.dumps(head), encoding="utf-8")
    (folder / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    return folder


GATE_HEAD: dict[str, Any] = {
    "name": "mini",
    "kind": "gate",
    "labels": ["block", "pass"],
    "arms": [
        {"name": "rules-only", "baseline": True, "supervisor": False},
        {"name": "supervisor-same"},
    ],
}
"""A two-arm gate suite head."""


def gate_case(case_id: str, draft: str, expected: str, **extra: Any) -> dict[str, Any]:
    """A gate case in English."""
    state = {"locale": "en", "message": "How are you?", "draft": draft}
    return {"id": case_id, "goal": "g", "state": state, "expected": expected, **extra}
