"""Every server test's default store starts from the session's migrated SQLite file.

The handlers, not the schema, are under test here; the migrations are tested from an empty
file in tests/store (and run wherever a test opens a store it did not seed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.stores import seed_migrated


@pytest.fixture(autouse=True)
def migrated_default_store(clean_environ: None, migrated_sqlite: Path) -> None:
    """Seed the file ``FOUREYES_STORE__URL`` names (set by ``clean_environ``)."""
    url = os.environ["FOUREYES_STORE__URL"]
    seed_migrated(migrated_sqlite, Path(url.removeprefix("sqlite+aiosqlite:///")))
