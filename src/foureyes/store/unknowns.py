"""Open unknowns of a conversation: what a Supervisor said it could not judge.

When a verdict is ``insufficient``, the gate keeps its missing items here, and every later
review of the conversation is shown them until someone resolves them explicitly. Nothing
the gate or a model writes later (a Counselor summary included) can close one: only
:meth:`SqlOpenUnknowns.resolve` does, with a note of who resolved it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, select, update

from foureyes.core.digest import sha256_hex
from foureyes.core.errors import UsageError
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store._pending import PendingRuns
from foureyes.store.tables import gate_open_unknowns

__all__ = ["OpenUnknown", "SqlOpenUnknowns", "unknown_key"]

_t = gate_open_unknowns.c
# Built once: the open unknowns of a conversation, newest first.
_OPEN = (
    select(_t.text)
    .where(_t.conversation_id == bindparam("conversation"), _t.resolved_at.is_(None))
    .order_by(_t.raised_at.desc(), _t.id)
    .limit(bindparam("limit"))
)


def unknown_key(text: str) -> str:
    """The identity of an unknown: SHA-256 of its text, whitespace collapsed, case folded."""
    return sha256_hex(" ".join(text.split()).casefold())


@dataclass(frozen=True, slots=True)
class OpenUnknown:
    """One unknown of a conversation, open or resolved."""

    id: str
    """Row id."""
    conversation_id: str
    """The conversation it belongs to."""
    text: str
    """What the Supervisor said it lacked (model-written)."""
    raised_by: str
    """Trace id of the run whose verdict raised it (last raised, if raised again)."""
    raised_at: dt.datetime
    """When it was (last) raised."""
    resolved_at: dt.datetime | None
    """When it was resolved; ``None`` while open."""
    resolved_by: str | None
    """Who or what resolved it."""


class SqlOpenUnknowns:
    """Open unknowns in the store's ``gate_open_unknowns`` table.

    Satisfies :class:`foureyes.gate.OpenUnknowns`. An unknown raised again while open
    stays as it is; raised again after being resolved, it opens again.
    """

    def __init__(
        self, db: Database, *, clock: WallClock = utc_now, pending: PendingRuns | None = None
    ) -> None:
        """Use ``db`` and ``clock``.

        With ``pending`` (the trace writer's reserved runs), unknowns raised by a reserved
        run write the run's header in the same transaction.
        """
        self._db = db
        self._clock = clock
        self._pending = pending if pending is not None else PendingRuns(db)
        self._insert = db.insert_ignoring_conflict_of(
            gate_open_unknowns, ["conversation_id", "text_sha256"]
        )

    async def open(self, conversation_id: str, *, limit: int) -> tuple[str, ...]:
        """The open unknowns' texts, most recently raised first, at most ``limit``.

        Raises:
            StoreError: the store could not be read.
        """
        if limit <= 0:
            return ()
        params = {"conversation": conversation_id, "limit": limit}
        return await self._db.run_read(
            "open_unknowns", lambda conn: tuple(conn.execute(_OPEN, params).scalars())
        )

    async def add(self, conversation_id: str, texts: Sequence[str], *, trace_id: str) -> None:
        """Record unknowns raised by run ``trace_id``, in one transaction.

        Raises:
            StoreError: the write failed (for example, ``trace_id`` is no run); nothing
                is recorded then.
            UsageError: a text is empty.
        """
        now = require_utc(self._clock(), "the store clock")
        cleaned = [" ".join(text.split()) for text in texts]
        if any(not text for text in cleaned):
            raise UsageError("an open unknown needs text")
        if not cleaned:
            return

        def work(conn: Connection) -> None:
            for text in dict.fromkeys(cleaned):
                key = unknown_key(text)
                conn.execute(
                    self._insert,
                    {
                        "id": uuid.uuid4().hex,
                        "conversation_id": conversation_id,
                        "text_sha256": key,
                        "text": text,
                        "raised_by": trace_id,
                        "raised_at": now,
                    },
                )
                conn.execute(
                    update(gate_open_unknowns)
                    .where(
                        _t.conversation_id == conversation_id,
                        _t.text_sha256 == key,
                        _t.resolved_at.is_not(None),
                    )
                    .values(raised_by=trace_id, raised_at=now, resolved_at=None, resolved_by=None)
                )

        await self._pending.run("add_unknowns", trace_id, work)

    async def resolve(self, conversation_id: str, texts: Sequence[str], *, resolved_by: str) -> int:
        """Close the open unknowns with these texts; returns how many were closed.

        Raises:
            StoreError: the write failed; nothing is closed then.
            UsageError: ``resolved_by`` is empty.
        """
        if not resolved_by.strip():
            raise UsageError("resolving an unknown needs a note of who resolved it")
        now = require_utc(self._clock(), "the store clock")
        keys = [unknown_key(text) for text in texts]
        async with self._db.write("resolve_unknowns") as conn:
            result = await conn.execute(
                update(gate_open_unknowns)
                .where(
                    _t.conversation_id == conversation_id,
                    _t.text_sha256.in_(keys),
                    _t.resolved_at.is_(None),
                )
                .values(resolved_at=now, resolved_by=resolved_by)
            )
        return result.rowcount

    async def entries(
        self, conversation_id: str, *, include_resolved: bool = False
    ) -> tuple[OpenUnknown, ...]:
        """The unknowns of a conversation, most recently raised first.

        Raises:
            StoreError: the store could not be read.
        """
        query = select(gate_open_unknowns).where(_t.conversation_id == conversation_id)
        if not include_resolved:
            query = query.where(_t.resolved_at.is_(None))
        async with self._db.read("list_unknowns") as conn:
            rows = (await conn.execute(query.order_by(_t.raised_at.desc(), _t.id))).all()
        return tuple(
            OpenUnknown(
                id=row.id,
                conversation_id=row.conversation_id,
                text=row.text,
                raised_by=row.raised_by,
                raised_at=row.raised_at,
                resolved_at=row.resolved_at,
                resolved_by=row.resolved_by,
            )
            for row in rows
        )
