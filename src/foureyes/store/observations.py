"""Durable observations in the store: written in one transaction, all or nothing.

This module only stores and reads rows; deciding what may become an observation is the
durable owner's job (:class:`foureyes.evidence.DurableOwner`), which hands over text it
rendered itself. Every row belongs to a *tenant* (the server writes ``key:<id>`` of the
API key that committed it, a local caller :data:`LOCAL_TENANT`) and reads name the tenant
they may see. One record is observed at most once per tenant, subject and snapshot: the
table's unique key makes a retried commit a no-op, reported per record, even when two
instances commit the same selection at once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from foureyes.core.errors import UsageError
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.tables import observations
from foureyes.store.traces import new_trace_id

__all__ = [
    "LOCAL_TENANT",
    "NewObservation",
    "ObservationBatch",
    "RecordedBatch",
    "SqlObservationLog",
    "StoredObservation",
]

_MAX_LIST = 1000
_UNIQUE = ("tenant", "subject", "snapshot_id", "evidence_ref")


@dataclass(frozen=True, slots=True)
class ObservationBatch:
    """What every observation of one commit shares."""

    tenant: str
    """Who committed them; only that tenant (and a read of every tenant) sees them."""
    subject: str
    """Whom the observations are about."""
    snapshot_id: str
    """The catalog snapshot cited."""
    catalog_sha256: str
    """Digest of the catalog as the owner rebuilt it."""
    kinds_sha256: str
    """Digest of the kinds registry that rendered the text."""
    renderer_version: str
    """Version of the rendering rules."""
    locale: str
    """Locale the text is in."""
    trace_id: str | None = None
    """The run that committed them, when one was traced."""


@dataclass(frozen=True, slots=True)
class NewObservation:
    """One observation to store, its text already rendered by the durable owner."""

    kind: str
    """Observation kind."""
    evidence_ref: str
    """Ref of the cited record."""
    evidence_kind: str
    """Source kind of the cited record."""
    evidence_sha256: str
    """Digest of the cited record."""
    label: str
    """Rendered label."""
    description: str
    """Rendered description."""


@dataclass(frozen=True, slots=True)
class RecordedBatch:
    """What one :meth:`SqlObservationLog.record` wrote."""

    commit_id: str
    """Groups the rows written together."""
    inserted: tuple[str, ...]
    """Refs written now, in the order given."""
    already_recorded: tuple[str, ...]
    """Refs skipped because the subject already had them for the snapshot."""


@dataclass(frozen=True, slots=True)
class StoredObservation:
    """An observation as read back from the store."""

    id: str
    commit_id: str
    tenant: str
    subject: str
    snapshot_id: str
    evidence_ref: str
    evidence_kind: str
    evidence_sha256: str
    kind: str
    locale: str
    label: str
    description: str
    catalog_sha256: str
    kinds_sha256: str
    renderer_version: str
    trace_id: str | None
    created_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data (time in ISO 8601)."""
        return {
            "id": self.id,
            "commit_id": self.commit_id,
            "tenant": self.tenant,
            "subject": self.subject,
            "snapshot_id": self.snapshot_id,
            "evidence_ref": self.evidence_ref,
            "evidence_kind": self.evidence_kind,
            "evidence_sha256": self.evidence_sha256,
            "kind": self.kind,
            "locale": self.locale,
            "label": self.label,
            "description": self.description,
            "catalog_sha256": self.catalog_sha256,
            "kinds_sha256": self.kinds_sha256,
            "renderer_version": self.renderer_version,
            "trace_id": self.trace_id,
            "created_at": self.created_at.isoformat(),
        }


class SqlObservationLog:
    """Writes and reads the ``observations`` table.

    Reach it as ``Store.observations``.
    """

    def __init__(self, db: Database, *, clock: WallClock = utc_now) -> None:
        """Use ``db``; ``clock`` stamps ``created_at``."""
        self._db = db
        self._clock = clock

    async def record(
        self, batch: ObservationBatch, rows: Sequence[NewObservation]
    ) -> RecordedBatch:
        """Write ``rows`` in one transaction: every new one, or none at all.

        A row whose record the subject already has for the snapshot is skipped and
        reported; any other failure rolls the whole batch back.

        Raises:
            StoreError: the write failed; nothing of the batch was written.
            UsageError: ``rows`` cites one record twice.
        """
        refs = [row.evidence_ref for row in rows]
        if len(set(refs)) != len(refs):
            raise UsageError("an observation batch cites one record twice")
        now = require_utc(self._clock(), "the store clock")
        commit_id = new_trace_id(now)
        inserted: list[str] = []
        skipped: list[str] = []
        async with self._db.write("record_observations") as conn:
            for seq, row in enumerate(rows):
                values = {
                    # Sorts by commit, then by position within it.
                    "id": f"{commit_id[:24]}{seq:08x}",
                    "commit_id": commit_id,
                    "tenant": batch.tenant,
                    "subject": batch.subject,
                    "snapshot_id": batch.snapshot_id,
                    "evidence_ref": row.evidence_ref,
                    "evidence_kind": row.evidence_kind,
                    "evidence_sha256": row.evidence_sha256,
                    "kind": row.kind,
                    "locale": batch.locale,
                    "label": row.label,
                    "description": row.description,
                    "catalog_sha256": batch.catalog_sha256,
                    "kinds_sha256": batch.kinds_sha256,
                    "renderer_version": batch.renderer_version,
                    "trace_id": batch.trace_id,
                    "created_at": now,
                }
                statement = self._db.insert_ignoring_conflict(observations, values, _UNIQUE)
                result = await conn.execute(statement)
                (inserted if result.rowcount == 1 else skipped).append(row.evidence_ref)
        return RecordedBatch(
            commit_id=commit_id, inserted=tuple(inserted), already_recorded=tuple(skipped)
        )

    async def for_subject(
        self, subject: str, *, tenant: str | None, limit: int = 100
    ) -> list[StoredObservation]:
        """The subject's most recent observations (at most ``limit``), oldest first.

        Args:
            subject: whom the observations are about.
            tenant: whose rows to read; ``None`` reads every tenant's (the admin scope).
                There is no default: a caller must say whose data it may see.
            limit: at most this many rows (1 to 1000).

        Raises:
            StoreError: the store could not be read.
            UsageError: ``limit`` is not between 1 and 1000.
        """
        if not 1 <= limit <= _MAX_LIST:
            raise UsageError(f"limit must be between 1 and {_MAX_LIST}, got {limit}")
        query = select(observations).where(observations.c.subject == subject)
        if tenant is not None:
            query = query.where(observations.c.tenant == tenant)
        async with self._db.read("list_observations") as conn:
            rows = (await conn.execute(query.order_by(observations.c.id.desc()).limit(limit))).all()
        return [_stored(row) for row in reversed(rows)]

    async def for_commit(self, commit_id: str) -> list[StoredObservation]:
        """The observations one commit wrote, in the order they were given.

        Raises:
            StoreError: the store could not be read.
        """
        async with self._db.read("list_observations") as conn:
            rows = (
                await conn.execute(
                    select(observations)
                    .where(observations.c.commit_id == commit_id)
                    .order_by(observations.c.id)
                )
            ).all()
        return [_stored(row) for row in rows]


def _stored(row: Any) -> StoredObservation:
    return StoredObservation(
        id=row.id,
        commit_id=row.commit_id,
        tenant=row.tenant,
        subject=row.subject,
        snapshot_id=row.snapshot_id,
        evidence_ref=row.evidence_ref,
        evidence_kind=row.evidence_kind,
        evidence_sha256=row.evidence_sha256,
        kind=row.kind,
        locale=row.locale,
        label=row.label,
        description=row.description,
        catalog_sha256=row.catalog_sha256,
        kinds_sha256=row.kinds_sha256,
        renderer_version=row.renderer_version,
        trace_id=row.trace_id,
        created_at=row.created_at,
    )
