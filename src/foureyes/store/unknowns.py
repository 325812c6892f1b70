"""Open unknowns of a conversation: what a Supervisor said it could not judge.

When a verdict is ``insufficient``, the gate keeps its missing items here, and every later
review and draft of the conversation is shown them until they are resolved: by a later
verdict that judged the reply (approve or reject) without listing them again
(:meth:`SqlOpenUnknowns.settle`), or explicitly (:meth:`SqlOpenUnknowns.resolve`,
:meth:`SqlOpenUnknowns.resolve_id`), with a note of who or what resolved it. Nothing else
the gate or a model writes (a Counselor summary included) can close one.

The text of an unknown is model-written and may restate the user's words, so what
operators and traces are shown of it follows ``[privacy]`` like raw input: kept only when
``store_raw_text`` is on, until ``retention_days`` have passed (then it reads as ``None``
and the purge erases it). The unknown itself stays, identified by the HMAC of its text, so
a verdict listing it again still matches it.

The next prompts are shown its words whatever ``store_raw_text`` says: "I cannot judge
yet" must not be lost to a reviewer that can no longer say what it could not judge. They
are kept sealed (:class:`~foureyes.store._sealing.UnknownSeal`, AES-256-GCM bound to the
row) under the store's unknowns key, and erased when the unknown is resolved or
``unknown_retention_days`` after it was last raised, whichever comes first. Words that do
not open (the key changed, the row was altered) read as not kept: the unknown stays open,
the event is logged and counted (:attr:`SqlOpenUnknowns.unopenable`), nothing fails.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
    update,
)

from foureyes.config import PrivacyConfig
from foureyes.core.errors import UsageError
from foureyes.core.ids import random_hex
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database, DriverSelect
from foureyes.store._pending import PendingRuns
from foureyes.store._sealing import UnknownSeal
from foureyes.store.tables import gate_open_unknowns

__all__ = ["OpenUnknown", "SqlOpenUnknowns", "expired_unknown_erasure", "normalise_unknown"]

_log = logging.getLogger(__name__)
_t = gate_open_unknowns.c
# What resolving an unknown writes besides who and when: its sealed words are erased.
_ERASE_WORDS = {"sealed_text": None, "sealed_expires_at": None}
# Built once: the open unknowns of a conversation, newest first.
_OPEN = DriverSelect(
    select(gate_open_unknowns)
    .where(_t.conversation_id == bindparam("conversation"), _t.resolved_at.is_(None))
    .order_by(_t.raised_at.desc(), _t.id)
    .limit(bindparam("limit"))
)


def normalise_unknown(text: str) -> str:
    """An unknown's text as compared: whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


def _expired_text(now: dt.datetime, privacy: PrivacyConfig) -> ColumnElement[bool]:
    """Whether an unknown's plain text is past its retention at ``now`` (and still stored).

    A row with an expiry is judged by it. A row recorded before expiries were kept
    (revision 0010) has text and no expiry: under ``store_raw_text`` off its text is
    expired at once, otherwise ``retention_days`` after it was raised.
    """
    legacy_cutoff = now - dt.timedelta(days=privacy.retention_days if privacy.store_raw_text else 0)
    return and_(
        _t.text.is_not(None),
        or_(
            _t.text_expires_at <= now,
            and_(_t.text_expires_at.is_(None), _t.raised_at <= legacy_cutoff),
        ),
    )


def _expired_words(now: dt.datetime) -> ColumnElement[bool]:
    """Whether an unknown's sealed words are past their retention at ``now`` (and stored)."""
    return and_(
        _t.sealed_text.is_not(None),
        or_(_t.sealed_expires_at <= now, _t.sealed_expires_at.is_(None)),
    )


def expired_unknown_erasure(
    now: dt.datetime, privacy: PrivacyConfig
) -> tuple[ColumnElement[bool], dict[str, Any]]:
    """Which unknowns hold text past its retention at ``now``, and the values that erase it.

    The condition selects a row whose plain text (see ``store_raw_text``) or sealed
    words (``unknown_retention_days``) have expired; the values, given to one UPDATE,
    erase each of the two that has and leave the other as it is, so a row is erased
    (and counted) once.
    """
    text, words = _expired_text(now, privacy), _expired_words(now)
    values = {
        "text": case((text, None), else_=_t.text),
        "text_expires_at": case((text, None), else_=_t.text_expires_at),
        "sealed_text": case((words, None), else_=_t.sealed_text),
        "sealed_expires_at": case((words, None), else_=_t.sealed_expires_at),
    }
    return or_(text, words), values


@dataclass(frozen=True, slots=True)
class OpenUnknown:
    """One unknown of a conversation, open or resolved."""

    id: str
    """Row id."""
    conversation_id: str
    """The conversation it belongs to."""
    text: str | None
    """What the Supervisor said it lacked (model-written), as operators are shown it;
    ``None`` when the text is not kept (``privacy.store_raw_text`` off) or its retention
    has run out."""
    raised_by: str
    """Trace id of the run whose verdict raised it (last raised, if raised again)."""
    raised_at: dt.datetime
    """When it was (last) raised."""
    resolved_at: dt.datetime | None
    """When it was resolved; ``None`` while open."""
    resolved_by: str | None
    """Who or what resolved it (``verdict:<trace id>`` for a later verdict)."""
    words: str | None = field(default=None, repr=False)
    """What the Supervisor said it lacked, as the next prompts are shown it (never in
    :meth:`as_json`): its sealed words, or its kept :attr:`text`; ``None`` once both are
    gone (resolved, past retention, or sealed under a key the store no longer has)."""

    def as_json(self) -> dict[str, Any]:
        """The unknown as JSON."""
        return {
            "id": self.id,
            "conversation_id": self.conversation_id,
            "text": self.text,
            "raised_by": self.raised_by,
            "raised_at": self.raised_at.isoformat(),
            "resolved_at": None if self.resolved_at is None else self.resolved_at.isoformat(),
            "resolved_by": self.resolved_by,
        }


class SqlOpenUnknowns:
    """Open unknowns in the store's ``gate_open_unknowns`` table.

    Satisfies :class:`foureyes.gate.OpenUnknowns`. An unknown raised again while open
    stays as it is but for its text, stored again with a fresh expiry, and its words,
    sealed again as last worded with a fresh expiry; raised again after being resolved, it
    opens again.
    """

    def __init__(
        self,
        db: Database,
        *,
        privacy: PrivacyConfig,
        fingerprint: Callable[[str], str],
        seal: UnknownSeal,
        clock: WallClock = utc_now,
        pending: PendingRuns | None = None,
    ) -> None:
        """Use ``db`` and ``clock``; keep texts as ``privacy`` says, keyed by ``fingerprint``.

        Words for the next prompts are sealed with ``seal``. With ``pending`` (the trace
        writer's reserved runs), unknowns raised by a reserved run write the run's header
        in the same transaction.
        """
        self._db = db
        self._privacy = privacy
        self._fingerprint = fingerprint
        self._seal = seal
        self._clock = clock
        self._pending = pending if pending is not None else PendingRuns(db)
        self._unopenable = 0
        self._insert = db.insert_ignoring_conflict_of(
            gate_open_unknowns, ["conversation_id", "text_sha256"]
        )

    @property
    def unopenable(self) -> int:
        """Sealed words read since the store opened that did not open (each read counts).

        Another key (``privacy.unknowns_key_env`` changed, or a store key replaced) or an
        altered row; each such unknown is shown as one whose wording is not kept.
        """
        return self._unopenable

    def key(self, text: str) -> str:
        """The identity of an unknown: the HMAC of its :func:`normalise_unknown` text."""
        return self._fingerprint(normalise_unknown(text))

    async def open(self, conversation_id: str, *, limit: int) -> tuple[OpenUnknown, ...]:
        """The open unknowns, most recently raised first, at most ``limit``, with their words.

        Raises:
            StoreError: the store could not be read.
        """
        if limit <= 0:
            return ()
        params = {"conversation": conversation_id, "limit": limit}
        now = self._now()
        rows = await self._db.run_statement("open_unknowns", _OPEN, params, write=False)
        return tuple(self._entry(row, now) for row in rows)

    async def add(self, conversation_id: str, texts: Sequence[str], *, trace_id: str) -> None:
        """Record unknowns raised by run ``trace_id``, in one transaction.

        Raises:
            StoreError: the write failed (for example, ``trace_id`` is no run); nothing
                is recorded then.
            UsageError: a text is empty.
        """
        await self.settle(conversation_id, trace_id=trace_id, raised=texts)

    async def settle(
        self,
        conversation_id: str,
        *,
        trace_id: str,
        raised: Sequence[str] = (),
        shown: Sequence[str] = (),
        listed: Sequence[str] = (),
    ) -> int:
        """Record what run ``trace_id``'s verdict said about the unknowns, in one transaction.

        Args:
            conversation_id: the conversation.
            trace_id: the run whose verdict it was.
            raised: texts it could not judge without (kept open, see :meth:`add`).
            shown: ids of the open unknowns it was shown and judged the reply despite;
                each is resolved by ``verdict:<trace_id>`` unless ``listed`` names it.
            listed: texts it still lists (compared by :meth:`key`).

        Returns:
            How many unknowns it resolved.

        Raises:
            StoreError: the write failed (for example, ``trace_id`` is no run); nothing
                is recorded then.
            UsageError: a raised text is empty.
        """
        now = self._now()
        cleaned = [" ".join(text.split()) for text in raised]
        if any(not text for text in cleaned):
            raise UsageError("an open unknown needs text")
        if not cleaned and not shown:
            return 0
        keep = self._privacy.store_raw_text
        expires = now + dt.timedelta(days=self._privacy.retention_days) if keep else None
        sealed_expires = now + dt.timedelta(days=self._privacy.unknown_retention_days)
        raised_rows: dict[str, str] = {}
        for text in cleaned:
            raised_rows.setdefault(self.key(text), text)
        still_listed = [self.key(text) for text in listed]

        def work(conn: Connection) -> int:
            for key, text in raised_rows.items():
                kept = {"text": text if keep else None, "text_expires_at": expires}
                conn.execute(
                    self._insert,
                    {
                        "id": random_hex(16),
                        "conversation_id": conversation_id,
                        "text_sha256": key,
                        "raised_by": trace_id,
                        "raised_at": now,
                        **kept,
                    },
                )
                # Raised again, its text is kept again (or dropped) by the settings in
                # force, its first wording kept, its retention counted from this raise;
                # its words are sealed again, bound to the row (new or known), as worded
                # now, so words sealed under an earlier key open again.
                known = and_(_t.conversation_id == conversation_id, _t.text_sha256 == key)
                row_id = conn.execute(select(_t.id).where(known)).scalar_one()
                sealed = self._seal.seal(text, conversation_id=conversation_id, unknown_id=row_id)
                again = {**kept, "text": func.coalesce(_t.text, text)} if keep else kept
                conn.execute(
                    update(gate_open_unknowns)
                    .where(_t.id == row_id)
                    .values(**again, sealed_text=sealed, sealed_expires_at=sealed_expires)
                )
                conn.execute(
                    update(gate_open_unknowns)
                    .where(known, _t.resolved_at.is_not(None))
                    .values(raised_by=trace_id, raised_at=now, resolved_at=None, resolved_by=None)
                )
            if not shown:
                return 0
            return conn.execute(
                update(gate_open_unknowns)
                .where(
                    _t.conversation_id == conversation_id,
                    _t.id.in_(list(shown)),
                    _t.text_sha256.not_in(still_listed),
                    _t.resolved_at.is_(None),
                )
                .values(resolved_at=now, resolved_by=f"verdict:{trace_id}", **_ERASE_WORDS)
            ).rowcount

        # The conversation's rows, which a concurrent run of the same conversation (in
        # another process too) may update: a transaction of its own, never grouped, so
        # two groups cannot lock two conversations' rows in opposite orders.
        return await self._pending.run("settle_unknowns", trace_id, work, grouped=False)

    async def resolve(self, conversation_id: str, texts: Sequence[str], *, resolved_by: str) -> int:
        """Close the open unknowns with these texts; returns how many were closed.

        Raises:
            StoreError: the write failed; nothing is closed then.
            UsageError: ``resolved_by`` is empty.
        """
        keys = [self.key(text) for text in texts]
        return await self._resolve(conversation_id, _t.text_sha256.in_(keys), resolved_by)

    async def resolve_id(self, conversation_id: str, unknown_id: str, *, resolved_by: str) -> bool:
        """Close the open unknown ``unknown_id`` of the conversation; whether it was open.

        Raises:
            StoreError: the write failed; nothing is closed then.
            UsageError: ``resolved_by`` is empty.
        """
        return await self._resolve(conversation_id, _t.id == unknown_id, resolved_by) == 1

    async def _resolve(
        self, conversation_id: str, which: ColumnElement[bool], resolved_by: str
    ) -> int:
        if not resolved_by.strip():
            raise UsageError("resolving an unknown needs a note of who resolved it")
        now = self._now()
        async with self._db.write("resolve_unknowns") as conn:
            result = await conn.execute(
                update(gate_open_unknowns)
                .where(_t.conversation_id == conversation_id, which, _t.resolved_at.is_(None))
                .values(resolved_at=now, resolved_by=resolved_by, **_ERASE_WORDS)
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
        now = self._now()
        async with self._db.read("list_unknowns") as conn:
            rows = (await conn.execute(query.order_by(_t.raised_at.desc(), _t.id))).all()
        return tuple(self._entry(row, now) for row in rows)

    def _entry(self, row: Any, now: dt.datetime) -> OpenUnknown:
        text = None if self._text_expired(row, now) else row.text
        words = self._words(row, now)
        return OpenUnknown(
            id=row.id,
            conversation_id=row.conversation_id,
            text=text,
            raised_by=row.raised_by,
            raised_at=row.raised_at,
            resolved_at=row.resolved_at,
            resolved_by=row.resolved_by,
            words=text if words is None else words,
        )

    def _words(self, row: Any, now: dt.datetime) -> str | None:
        """The row's sealed words, opened; ``None`` when erased, expired or unopenable."""
        if row.sealed_text is None or row.resolved_at is not None:
            return None
        if row.sealed_expires_at is None or row.sealed_expires_at <= now:
            return None  # the purge may not have run yet
        words = self._seal.open(
            row.sealed_text, conversation_id=row.conversation_id, unknown_id=row.id
        )
        if words is None:
            self._unopenable += 1
            _log.warning(
                "open unknown %s: its sealed words do not open under the store's unknowns "
                "key (the key changed or the row was altered); prompts say its wording is "
                "not kept",
                row.id,
            )
        return words

    def _text_expired(self, row: Any, now: dt.datetime) -> bool:
        """:func:`_expired_text` for a row read (the purge may not have run yet)."""
        if row.text_expires_at is not None:
            return bool(row.text_expires_at <= now)
        days = self._privacy.retention_days if self._privacy.store_raw_text else 0
        return bool(row.raised_at <= now - dt.timedelta(days=days))

    def _now(self) -> dt.datetime:
        return require_utc(self._clock(), "the store clock")
