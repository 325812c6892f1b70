"""Separate trust domains on PostgreSQL: the gateway reads observations, only the owner writes.

:func:`role_statements` is the SQL ``foureyes store init-roles`` runs as the store's
administrator (the role that migrated it and owns its tables, so its triggers cannot be
dropped or disabled by either role):

- the **gateway** role (``foureyes serve``'s ``store.url``) may read and write every
  table except the evidence-bound ones, which it may only read: an observation it tries
  to insert is refused by the privilege system before any trigger runs;
- the **owner** role (``[evidence] owner_url``, the durable owner's own connection) may
  read the evidence-bound tables and insert into them, nothing else; each insert still
  passes the rendering check (:mod:`foureyes.store.rendering`), and no role may update
  or delete those rows.

Roles are created ``LOGIN`` without a password when missing; set one with
``ALTER ROLE name PASSWORD '...'`` (or use certificate or peer authentication).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text

from foureyes.core.errors import UsageError
from foureyes.store._database import Database

__all__ = [
    "EVIDENCE_TABLES",
    "Independence",
    "init_roles",
    "judge_independence",
    "role_statements",
    "writable_evidence",
]

EVIDENCE_TABLES = (
    "observations",
    "evidence_snapshots",
    "evidence_records",
    "evidence_slots",
    "observation_templates",
    "observation_kind_sources",
)
"""The tables only the owner role may insert into."""

_ROLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def role_statements(gateway: str, owner: str) -> list[str]:
    """The SQL creating (when missing) and granting the two roles, in order.

    Raises:
        UsageError: a name is not a lowercase SQL identifier, or both are the same.
    """
    for name in (gateway, owner):
        if not _ROLE.fullmatch(name):
            raise UsageError(f"role name {name!r} must be a lowercase identifier")
    if gateway == owner:
        raise UsageError("the gateway and the owner must be different roles")
    evidence = ", ".join(EVIDENCE_TABLES)
    others = (
        "SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables"
        " WHERE schemaname = current_schema()"
        f" AND tablename NOT IN ({', '.join(repr(t) for t in EVIDENCE_TABLES)})"
    )
    statements = [
        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}')"
        f" THEN CREATE ROLE {name} LOGIN; END IF; END $$"
        for name in (gateway, owner)
    ]
    statements += [
        f"GRANT USAGE ON SCHEMA public TO {gateway}, {owner}",
        f"REVOKE ALL ON {evidence} FROM PUBLIC, {gateway}, {owner}",
        f"GRANT SELECT ON {evidence} TO {gateway}, {owner}",
        f"GRANT INSERT ON {evidence} TO {owner}",
        # alembic_version, the store's key and every table outside evidence-bound facts.
        f"DO $$ BEGIN EXECUTE 'GRANT SELECT, INSERT, UPDATE, DELETE ON ' || ({others})"
        f" || ' TO {gateway}'; END $$",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {gateway}",
    ]
    return statements


async def init_roles(db: Database, gateway: str, owner: str) -> None:
    """Run :func:`role_statements` on ``db`` (PostgreSQL, as the tables' owner) in one go.

    Raises:
        UsageError: ``db`` is not PostgreSQL, or a role name is unusable.
        StoreError: a statement failed; nothing was granted.
    """
    if db.dialect != "postgresql":
        raise UsageError("database roles exist on PostgreSQL only; SQLite has one file owner")
    statements = role_statements(gateway, owner)
    async with db.write("init_roles") as conn:
        for statement in statements:
            await conn.execute(text(statement))


@dataclass(frozen=True, slots=True)
class Independence:
    """Whether the durable owner is a trust boundary in this deployment, and why (not).

    The design's durable owner "does not need to trust upstream": that holds only when the
    process serving users cannot write what the owner guards. Reasons:

    - ``sqlite_one_trust_domain``: SQLite is one file; any connection to it can drop the
      checks, so they are a consistency check, not a boundary;
    - ``owner_in_process``: the owner writes from the serving process (no
      ``[evidence] owner_service_url``), so whoever controls that process holds the
      owner's credential;
    - ``gateway_can_write``: the serving process's store role may write (or owns) one of
      :data:`EVIDENCE_TABLES`;
    - ``separate_owner_service``: PostgreSQL, an owner service of its own, and a store
      role that can only read the evidence-bound tables: independent.
    """

    independent: bool
    """Whether a compromised serving process could not make the store persist a fact."""
    reason: str
    """One of the reason codes above."""
    detail: str = ""
    """What was found (the tables the serving role can write), secret-free."""

    def to_json(self) -> dict[str, object]:
        """``{"independent", "reason", "detail"}``."""
        return {"independent": self.independent, "reason": self.reason, "detail": self.detail}


def judge_independence(
    dialect: str, *, owner_service: bool, writable: Sequence[str] = ()
) -> Independence:
    """Whether the owner is independent here.

    Judged from the store's dialect, where the owner runs, and the evidence-bound tables
    the serving role can write (:func:`writable_evidence`).
    """
    if dialect != "postgresql":
        return Independence(False, "sqlite_one_trust_domain")
    if not owner_service:
        return Independence(False, "owner_in_process")
    if writable:
        return Independence(False, "gateway_can_write", ", ".join(sorted(writable)))
    return Independence(True, "separate_owner_service")


async def writable_evidence(db: Database) -> list[str]:
    """The evidence-bound tables ``db``'s role may insert into, update, or owns (PostgreSQL).

    Raises:
        StoreError: the catalogue could not be read.
    """
    if db.dialect != "postgresql":
        return list(EVIDENCE_TABLES)
    query = text(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relname = ANY(:tables)"
        " AND (pg_has_role(current_user, c.relowner, 'USAGE')"
        " OR has_table_privilege(c.oid, 'INSERT') OR has_table_privilege(c.oid, 'UPDATE')"
        " OR has_table_privilege(c.oid, 'DELETE') OR has_table_privilege(c.oid, 'TRUNCATE'))"
    )
    async with db.read("writable_evidence") as conn:
        rows = await conn.execute(query, {"tables": list(EVIDENCE_TABLES)})
        return sorted(str(row[0]) for row in rows)
