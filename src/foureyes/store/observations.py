"""Durable observations in the store: written in one transaction, all or nothing.

This module only stores and reads rows; deciding what may become an observation is the
durable owner's job (:class:`foureyes.evidence.DurableOwner`), which hands over text it
rendered itself. Every row belongs to a *tenant* (the server writes ``key:<id>`` of the
API key that committed it, a local caller :data:`LOCAL_TENANT`) and reads name the tenant
they may see. One record is observed at most once per tenant, subject and snapshot: the
table's unique key makes a retried commit a no-op, reported per record, even when two
instances commit the same selection at once.

The database checks every row itself (:mod:`foureyes.store.rendering`): :meth:`record`
first writes the frozen evidence the row restates (the snapshot's records with their
slot texts, and the kinds' templates), once per digest, and the table refuses a row whose
text is not its template rendered from its record.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from foureyes.core.errors import UsageError
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.roles import Independence, judge_independence, writable_evidence
from foureyes.store.tables import (
    evidence_records,
    evidence_slots,
    evidence_snapshots,
    observation_kind_sources,
    observation_templates,
    observations,
)
from foureyes.store.traces import new_trace_id

__all__ = [
    "EvidenceRecord",
    "EvidenceSnapshot",
    "KindTemplate",
    "KindTemplates",
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
class EvidenceRecord:
    """One record of a snapshot, as the database renders from it."""

    ref: str
    """The record's ref."""
    sha256: str
    """Digest of the record."""
    kind: str
    """Source kind of the record."""
    source: str
    """Where the record came from."""
    admissible: bool
    """Whether it may be cited."""
    slots: Mapping[str, str]
    """Each slot the record fills, with its text (``render.slot_texts``)."""


@dataclass(frozen=True, slots=True)
class EvidenceSnapshot:
    """A catalog snapshot as the durable owner rebuilt it: what observations may cite."""

    catalog_sha256: str
    """Digest of the catalog; names the snapshot's rows."""
    snapshot_id: str
    """The snapshot id."""
    records: Sequence[EvidenceRecord]
    """Every record of the snapshot."""
    subject: str | None = None
    """Whom the records are about; the database files an observation of the snapshot
    only under this subject (revision 0018)."""


@dataclass(frozen=True, slots=True)
class KindTemplate:
    """One kind's label and template in one locale, and what records it may cite."""

    kind: str
    """The kind's name."""
    locale: str
    """The locale."""
    label: str
    """The label in that locale."""
    template: str
    """The template in that locale, as written."""
    record_kinds: Sequence[str]
    """Record kinds the kind may cite."""
    record_sources: Sequence[str] = ()
    """Record sources it accepts (empty: any)."""


@dataclass(frozen=True, slots=True)
class KindTemplates:
    """Every kind of a registry, by the registry's digest and the renderer version."""

    kinds_sha256: str
    """Digest of the kinds registry."""
    renderer_version: str
    """Version of the rendering rules."""
    templates: Sequence[KindTemplate]
    """Every kind in every locale."""


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
        self,
        batch: ObservationBatch,
        rows: Sequence[NewObservation],
        *,
        snapshot: EvidenceSnapshot,
        kinds: KindTemplates,
    ) -> RecordedBatch:
        """Write ``rows`` in one transaction: every new one, or none at all.

        ``snapshot`` and ``kinds`` are written first, unless the store holds them already
        (by digest): the database renders each row from them and refuses any other text.
        A row whose record the subject already has for the snapshot is skipped and
        reported; any other failure rolls the whole batch back.

        Raises:
            StoreError: the write failed, or the database refused a row (its text is not
                its evidence's rendering); nothing of the batch was written.
            UsageError: ``rows`` cites one record twice, or ``snapshot`` or ``kinds`` is
                not the one ``batch`` names.
        """
        refs = [row.evidence_ref for row in rows]
        if len(set(refs)) != len(refs):
            raise UsageError("an observation batch cites one record twice")
        if (snapshot.catalog_sha256, snapshot.snapshot_id) != (
            batch.catalog_sha256,
            batch.snapshot_id,
        ) or (kinds.kinds_sha256, kinds.renderer_version) != (
            batch.kinds_sha256,
            batch.renderer_version,
        ):
            raise UsageError("the evidence given is not the one the batch names")
        now = require_utc(self._clock(), "the store clock")
        commit_id = new_trace_id(now)
        inserted: list[str] = []
        skipped: list[str] = []
        async with self._db.write("record_observations") as conn:
            await self._hold_snapshot(conn, snapshot)
            await self._hold_kinds(conn, kinds)
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

    async def _hold_snapshot(self, conn: AsyncConnection, snapshot: EvidenceSnapshot) -> None:
        held = await conn.execute(
            select(evidence_snapshots.c.catalog_sha256).where(
                evidence_snapshots.c.catalog_sha256 == snapshot.catalog_sha256
            )
        )
        if held.first() is not None:
            return
        # Two commits of a new snapshot at once: each writes it, the second writes nothing.
        await conn.execute(
            self._db.insert_ignoring_conflict(
                evidence_snapshots,
                {
                    "catalog_sha256": snapshot.catalog_sha256,
                    "snapshot_id": snapshot.snapshot_id,
                    "subject": snapshot.subject,
                },
                ("catalog_sha256",),
            )
        )
        digest = snapshot.catalog_sha256
        records = [
            {
                "catalog_sha256": digest,
                "ref": r.ref,
                "sha256": r.sha256,
                "kind": r.kind,
                "source": r.source,
                "admissible": r.admissible,
            }
            for r in snapshot.records
        ]
        slots = [
            {"catalog_sha256": digest, "ref": r.ref, "slot": slot, "slot_text": text}
            for r in snapshot.records
            for slot, text in r.slots.items()
        ]
        await self._insert_all(conn, evidence_records, records, ("catalog_sha256", "ref"))
        await self._insert_all(conn, evidence_slots, slots, ("catalog_sha256", "ref", "slot"))

    async def _hold_kinds(self, conn: AsyncConnection, kinds: KindTemplates) -> None:
        held = await conn.execute(
            select(observation_templates.c.kind)
            .where(observation_templates.c.kinds_sha256 == kinds.kinds_sha256)
            .where(observation_templates.c.renderer_version == kinds.renderer_version)
            .limit(1)
        )
        if held.first() is not None:
            return
        digest, version = kinds.kinds_sha256, kinds.renderer_version
        templates = [
            {
                "kinds_sha256": digest,
                "kind": t.kind,
                "locale": t.locale,
                "renderer_version": version,
                "label": t.label,
                "template": t.template,
            }
            for t in kinds.templates
        ]
        axes = {
            (t.kind, axis, name)
            for t in kinds.templates
            for axis, names in (("kind", t.record_kinds), ("source", t.record_sources))
            for name in names
        }
        sources = [
            {"kinds_sha256": digest, "kind": kind, "axis": axis, "name": name}
            for kind, axis, name in sorted(axes)
        ]
        await self._insert_all(
            conn,
            observation_templates,
            templates,
            ("kinds_sha256", "kind", "locale", "renderer_version"),
        )
        await self._insert_all(
            conn, observation_kind_sources, sources, ("kinds_sha256", "kind", "axis", "name")
        )

    async def _insert_all(
        self,
        conn: AsyncConnection,
        table: Any,
        rows: list[dict[str, Any]],
        conflict: Sequence[str],
    ) -> None:
        if rows:
            await conn.execute(self._db.insert_ignoring_conflict_of(table, conflict), rows)

    async def independence(self, *, owner_service: bool) -> Independence:
        """Whether the owner is a trust boundary for this connection's role.

        ``owner_service``: whether observations are committed by the owner service
        rather than through this process (see :class:`~foureyes.store.roles.Independence`).

        Raises:
            StoreError: PostgreSQL's catalogue could not be read.
        """
        dialect = self._db.dialect
        writable = await writable_evidence(self._db) if dialect == "postgresql" else []
        return judge_independence(dialect, owner_service=owner_service, writable=writable)

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
