"""Runs reserved in memory whose header row is written with the first write that names them.

A support message's run used to cost a transaction of its own just to insert its header,
before anything else was written. A reserved run (:meth:`SqlTraceWriter.reserve_run
<foureyes.store.traces.SqlTraceWriter.reserve_run>`) skips it: every store write that names
a run (an event, a finish, a triage's assessment, an open unknown) goes through
:meth:`PendingRuns.run`, which inserts the header of a reserved run first, in the same
transaction, so the foreign keys hold and the header is exactly as durable as the first
record that needs it. A reservation is forgotten only once that transaction committed; a
failed one leaves it reserved for the next write.

A run's store writes may also *hold* rows (:meth:`PendingRuns.hold`): a row that needs no
transaction of its own, because nothing outside the run acts on it before the run's next
write commits (the pipeline's triage of a message that made no model call), is inserted
by that next write, after the header. Held rows are as durable as the record that carries
them, and are forgotten with the reservation if the run is dropped.

A write may also say how the header reads once it has run (an :class:`Opening`): the
trace writer numbers and finishes a run with an ``UPDATE`` of its header, which a header
inserted by the same transaction does not need, so it is inserted as the update would
leave it and the write skips the update. One statement of the four of a typical reply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection

from foureyes.store._database import Database, DriverInsert
from foureyes.store.tables import trace_runs

__all__ = ["Opening", "PendingRuns"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Opening(Generic[_T]):
    """What a write does when its own transaction inserts the run's reserved header."""

    header: Mapping[str, Any]
    """Columns of the header as the write would leave them (they replace the reserved ones)."""
    work: Callable[[Connection], _T]
    """Runs instead of the write's ``work``: the header already reads as ``header``."""


class PendingRuns:
    """The reserved runs of one store, and the write transaction that opens them."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._insert_header = DriverInsert(db.insert_ignoring_conflict_of(trace_runs, ["trace_id"]))
        self._rows: dict[str, dict[str, Any]] = {}
        self._held: dict[str, list[tuple[DriverInsert, dict[str, Any]]]] = {}

    def reserve(self, row: Mapping[str, Any]) -> None:
        """Hold the header ``row`` (with its ``trace_id``) until a write names the run."""
        self._rows[str(row["trace_id"])] = dict(row)

    def hold(self, trace_id: str, statement: DriverInsert, row: Mapping[str, Any]) -> None:
        """Insert ``row`` with ``statement`` in the next write that names ``trace_id``."""
        self._held.setdefault(trace_id, []).append((statement, dict(row)))

    def discard(self, trace_id: str) -> bool:
        """Forget a reserved run never written (and its held rows); whether it was reserved."""
        self._held.pop(trace_id, None)
        return self._rows.pop(trace_id, None) is not None

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._rows

    async def run(
        self,
        operation: str,
        trace_id: str,
        work: Callable[[Connection], _T],
        *,
        grouped: bool = True,
        opening: Opening[_T] | None = None,
    ) -> _T:
        """A write transaction, opening with the run's reserved header and held rows.

        The header of ``trace_id`` is inserted first if it is reserved, then the rows
        held for the run, then ``work`` runs, all in one transaction. With ``opening``,
        a header this transaction inserts is inserted with ``opening.header`` and
        ``opening.work`` runs instead of ``work``; when the header was already written
        (before, or by a concurrent write naming the same run) ``work`` runs. With ``grouped``
        (the default) the transaction is shared with concurrent runs' writes
        (:meth:`Database.run_grouped_write`): ``work`` must then write only rows of this
        run (its events, texts, assessments), which no other run's write touches, so a
        group cannot deadlock with another process's. A write that touches shared rows
        passes ``grouped=False`` and gets a transaction of its own. A grouped write of
        the only reserved run is *alone* (:meth:`Database.run_grouped_write`): with no
        other reply in flight, on SQLite it commits at once, without waiting for the
        group's commit point two turns of the loop later.

        Raises:
            StoreError: the database failed, or ``work`` raised it; the run stays reserved
                (its rows held) then.
            UsageError: the store is closed.
        """
        row = self._rows.get(trace_id)
        held = tuple(self._held.get(trace_id, ()))

        def transaction(conn: Connection) -> _T:
            opened = False
            if row is not None:
                # Ids carry 80 random bits, so a conflict can only be this very header,
                # inserted by a concurrent write naming the same run (PostgreSQL); the
                # insert is then ignored and the write goes on as for a written run.
                header = row if opening is None else {**row, **opening.header}
                opened = self._insert_header.run(conn, [header]) == 1
            for statement, values in held:
                statement.run(conn, [values])
            return opening.work(conn) if opened and opening is not None else work(conn)

        if grouped:
            # The reserved runs are the process's replies in flight: when this one is the
            # only one, no other write is coming that its transaction could carry.
            alone = row is not None and len(self._rows) == 1
            result = await self._db.run_grouped_write(operation, transaction, alone=alone)
        else:
            result = await self._db.run_write(operation, transaction)
        self._rows.pop(trace_id, None)
        if held:
            # Only what this transaction wrote: a row held meanwhile waits for the next.
            remaining = self._held.get(trace_id, [])[len(held) :]
            if remaining:
                self._held[trace_id] = remaining
            else:
                self._held.pop(trace_id, None)
        return result
