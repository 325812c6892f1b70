"""Schema migrations: Alembic, run programmatically on the store's own connection."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from foureyes.store._database import Database

__all__ = ["alembic_config", "head_revision", "upgrade_to_head"]

_SCRIPT_LOCATION = Path(__file__).with_name("migrations")
# Any fixed 64-bit number: PostgreSQL instances opening the store together take turns.
_PG_MIGRATION_LOCK = 0x666F757265796573


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the packaged revisions, optionally bound to ``connection``."""
    config = Config()
    config.set_main_option("script_location", str(_SCRIPT_LOCATION))
    config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str | None:
    """The newest revision this version of foureyes knows (its scripts read once per process)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_to_head(db: Database) -> None:
    """Bring the database's schema to the newest revision; a no-op when it is already there.

    The upgrade is one transaction holding the write lock (SQLite) or an advisory lock
    (PostgreSQL), so instances starting together do not race, and a failure leaves the
    schema where it was.

    Raises:
        StoreError: the database cannot be reached or written, or its revision is unknown
            to this version of foureyes (a newer foureyes migrated it).
    """
    async with db.write("migrate") as conn:
        if db.dialect == "postgresql":
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
            )
        await conn.run_sync(_upgrade)


def _upgrade(connection: Connection) -> None:
    # At head already (every open but the first of a new version): nothing to load or run.
    # Reading the version row is all; `command.upgrade` would read every script again.
    if MigrationContext.configure(connection).get_current_heads() == (head_revision(),):
        return
    command.upgrade(alembic_config(connection), "head")
