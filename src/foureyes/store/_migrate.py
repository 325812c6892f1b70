"""Schema migrations: Alembic, run programmatically on the store's own connection.

Alembic (and with it the PostgreSQL dialect and Mako) is imported only when a migration
must run: a store already at :data:`HEAD_REVISION` is recognised by reading its
``alembic_version`` row with a plain query (benchmarks/README.md, "Starting the command
line").
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config

    from foureyes.store._database import Database

__all__ = [
    "HEAD_REVISION",
    "alembic_config",
    "current_revisions",
    "head_revision",
    "upgrade_to_head",
]

HEAD_REVISION = "0019"
"""The newest revision of the packaged scripts; a new script moves it (a test holds it to
the head Alembic computes from the scripts)."""

_SCRIPT_LOCATION = Path(__file__).with_name("migrations")
_VERSION_TABLE = "alembic_version"
# Any fixed 64-bit number: PostgreSQL instances opening the store together take turns.
_PG_MIGRATION_LOCK = 0x666F757265796573


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the packaged revisions, optionally bound to ``connection``."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_SCRIPT_LOCATION))
    config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str | None:
    """The head revision as Alembic computes it from the scripts (read once per process)."""
    from alembic.script import ScriptDirectory

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


def current_revisions(connection: Connection) -> tuple[str, ...]:
    """The revisions the ``alembic_version`` table records (none when there is no table)."""
    if not inspect(connection).has_table(_VERSION_TABLE):
        return ()
    rows = connection.execute(text(f"SELECT version_num FROM {_VERSION_TABLE}")).scalars()
    return tuple(sorted(str(row) for row in rows))


def _upgrade(connection: Connection) -> None:
    # At head already (every open but the first of a new version): nothing to load or run.
    # Reading the version row is all; Alembic would read every script again.
    if current_revisions(connection) == (HEAD_REVISION,):
        return
    from alembic import command
    from alembic.util import CommandError

    from foureyes.store._database import MigrationFailed

    try:
        command.upgrade(alembic_config(connection), "head")
    except CommandError as exc:
        # Its message names the revision it cannot place (a newer foureyes migrated it).
        raise MigrationFailed(str(exc)) from exc
