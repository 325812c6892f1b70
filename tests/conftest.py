"""Session-wide test set-up: a clean environment and a store under tmp_path for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.helpers.browser",
    "tests.helpers.postgres",
    "tests.helpers.server",
    "tests.helpers.simulator",
    "tests.helpers.stores",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live", action="store_true", help="allow calls to real model endpoints")


@pytest.fixture(autouse=True)
def clean_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No FOUREYES_* variable leaks in; the default store lives in this test's tmp dir."""
    for name in list(os.environ):
        if name.startswith("FOUREYES_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("FOUREYES_STORE__URL", f"sqlite+aiosqlite:///{tmp_path / 'foureyes.db'}")
    yield
