"""Session-wide test set-up: a clean environment and a store under tmp_path for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from foureyes.core.datadir import DATA_DIR_ENV

# No test is timed (a loaded machine fails a wall-clock bound): hypothesis' per-example
# deadline is off for every property test, not only for those that once tripped it.
settings.register_profile("foureyes", deadline=None)
settings.load_profile("foureyes")

pytest_plugins = [
    "tests.helpers.browser",
    "tests.helpers.data",
    "tests.helpers.postgres",
    "tests.helpers.server",
    "tests.helpers.simulator",
    "tests.helpers.stores",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live", action="store_true", help="allow calls to real model endpoints")


# Modules whose tests take longest one by one (a child interpreter importing every module,
# real browsers): run first, so that under `pytest -n 2` (the Makefile) they overlap the
# many short tests instead of ending the run alone.
_FIRST = ("tests/test_slim_install.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the tests of ``_FIRST`` first, keeping the collection order otherwise."""
    root = Path(__file__).resolve().parents[1]

    def rank(item: pytest.Item) -> int:
        path = item.path.resolve().relative_to(root).as_posix()
        return 0 if path in _FIRST else 1

    items.sort(key=rank)  # stable: the same order on every xdist worker


@pytest.fixture(autouse=True)
def clean_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No FOUREYES_* config variable leaks in; the default store lives in this test's tmp dir.

    ``FOUREYES_DATA_DIR`` stays: it is not config but where the third-party data is, read
    by the tests (tests/helpers/data.py) and the CLI defaults alike.
    """
    for name in list(os.environ):
        if name.startswith("FOUREYES_") and name != DATA_DIR_ENV:
            monkeypatch.delenv(name)
    monkeypatch.setenv("FOUREYES_STORE__URL", f"sqlite+aiosqlite:///{tmp_path / 'foureyes.db'}")
    yield
