"""The run list: which runs :meth:`SqlTraceWriter.list_runs` returns, and how each is shown.

Each run is joined to its triage (``risk_assessments.trace_id``), so a list can be
filtered by risk level. Trace ids begin with the run's start time in milliseconds, so
the primary key both orders the list and bounds it by date.

Each run has a purpose (:data:`RUN_PURPOSES`), read from its header: ``eval`` for a run
recorded with the purpose ``test`` or ``calibration`` in its meta (the eval harness's gate
and triage runs, calibration, test triages), ``chat`` for any other message the gateway
served, in any mode (support, guard, ``/v1/check``; the console's chat, ``foureyes chat``),
``other`` for the rest (reviews, facts,
live lone triages, a library's own gate runs).

Each run belongs to a tenant (:mod:`foureyes.core.tenancy`): the ``tenant`` its meta names
(the support pipeline, a lone triage and a facts run record the caller's), else
:data:`~foureyes.core.tenancy.LOCAL_TENANT`. A conversation id is only its tenant's own,
so two keys that send one id are told apart by their runs' tenants, and a list filtered
by tenant and conversation holds that one conversation.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, case, select

from foureyes.core.errors import UsageError
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.store._clock import require_utc
from foureyes.store.tables import risk_assessments, trace_runs

__all__ = [
    "MAX_LIST",
    "RUN_PURPOSES",
    "RunFilter",
    "RunSummary",
    "TENANT_MAX",
    "limited_list_query",
    "list_query",
    "require_tenant",
    "run_purpose",
    "run_tenant",
    "summary_of",
]

MAX_LIST = 1000
"""The most runs :meth:`~foureyes.store.traces.SqlTraceWriter.list_runs` returns at once."""
RUN_PURPOSES = ("chat", "eval", "other")
"""What a run was for: a support message, an evaluation (or test, or calibration), the rest."""
TENANT_MAX = 128
"""The longest tenant a run records (as long as an observation's)."""
_KEPT_APART = ("test", "calibration")
"""Purposes in a run's meta that mark it as an evaluation's, kept apart from live traffic."""
_CHAT_KINDS = ("support_message", "guard_message", "draft_check")
"""The run kinds of the messages the gateway serves, whatever its mode: a support message,
a message in guard mode and a caller's draft checked (:data:`foureyes.pipeline.RUN_KIND`,
``GUARD_RUN_KIND``, ``CHECK_RUN_KIND``). Each is listed as ``chat``, with its kind."""
_NO_LEVEL = frozenset({"unknown", "unscreened"})
"""Filter values naming a triage status that has no level."""


def _id_floor(at: dt.datetime) -> str:
    """The smallest trace id of a run started at ``at`` or later (ids sort by start time)."""
    return f"{int(require_utc(at, 'a date bound').timestamp() * 1000):012x}"


def require_tenant(value: object) -> str:
    """``value``, if it may be a run's tenant: a string of 1 to :data:`TENANT_MAX` characters.

    Raises:
        UsageError: it is not.
    """
    if not isinstance(value, str) or not 1 <= len(value) <= TENANT_MAX:
        shown = value[:80] if isinstance(value, str) else value
        raise UsageError(f"a tenant is a string of 1 to {TENANT_MAX} characters, got {shown!r}")
    return value


def run_tenant(meta: Mapping[str, Any] | None) -> str:
    """The tenant of a run with this meta: the ``tenant`` it names, else ``local``.

    Raises:
        UsageError: the meta names a tenant that is not one (:func:`require_tenant`).
    """
    return require_tenant((meta or {}).get("tenant", LOCAL_TENANT))


def run_purpose() -> ColumnElement[str]:
    """The SQL expression of a run's purpose (one of :data:`RUN_PURPOSES`)."""
    runs = trace_runs.c
    return case(
        (runs.meta["purpose"].as_string().in_(_KEPT_APART), "eval"),
        (runs.kind.in_(_CHAT_KINDS), "chat"),
        else_="other",
    )


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs a list holds; every field set narrows it."""

    purpose: str | None = None
    """Runs of this purpose only (one of :data:`RUN_PURPOSES`)."""
    kind: str | None = None
    """Runs of this kind only (``support_message``, ``gate_reply``, ...)."""
    tenant: str | None = None
    """Runs of this tenant only (``key:<key id>``, ``local``)."""
    reason: str | None = None
    """Runs finished with this reason code."""
    outcome: str | None = None
    """Runs finished with this outcome (``released``, ``fallback``, ...)."""
    risk_level: str | None = None
    """Runs whose triage found this level; ``unknown`` or ``unscreened``: triages of that
    status (which have no level)."""
    conversation_id: str | None = None
    """Runs of this conversation id (of every tenant using it, unless ``tenant`` is set)."""
    since: dt.datetime | None = None
    """Runs started at or after this time (aware)."""
    until: dt.datetime | None = None
    """Runs started before this time (aware)."""
    before: str | None = None
    """Runs older than this trace id: pass the last id of a page to get the next."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One line of a run list: its header and its triage's outcome, without its events."""

    trace_id: str
    """The run."""
    kind: str
    """What ran."""
    purpose: str
    """What it ran for (one of :data:`RUN_PURPOSES`)."""
    tenant: str
    """Whose run it is (``key:<key id>``, ``local``)."""
    conversation_id: str | None
    """Its conversation: an id of the tenant's own."""
    started_at: dt.datetime
    """When it started."""
    finished_at: dt.datetime | None
    """When it finished; ``None`` while open (or abandoned)."""
    outcome: str | None
    """Its final outcome."""
    reason: str | None
    """Its final reason code."""
    risk_status: str | None
    """The triage's status (``ok``, ``unknown``); ``None`` when the run had no triage."""
    risk_level: str | None
    """The triage's level, ``None`` when unknown or absent."""
    risk_tier: str | None
    """The deepest tier the triage reached."""
    risk_confirmed: bool | None
    """Whether double confirmation held."""

    def as_json(self) -> dict[str, Any]:
        """The summary as JSON (times in ISO 8601)."""
        return {
            "trace_id": self.trace_id,
            "kind": self.kind,
            "purpose": self.purpose,
            "tenant": self.tenant,
            "conversation_id": self.conversation_id,
            "started_at": self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
            "outcome": self.outcome,
            "reason": self.reason,
            "risk": None
            if self.risk_status is None
            else {
                "status": self.risk_status,
                "level": self.risk_level,
                "tier": self.risk_tier,
                "confirmed": self.risk_confirmed,
            },
        }


def list_query(where: RunFilter) -> Select[Any]:
    """The query of the runs ``where`` selects, newest first, each with its triage."""
    runs, risk = trace_runs.c, risk_assessments.c
    purpose = run_purpose()
    query = (
        select(
            runs.trace_id,
            runs.kind,
            purpose.label("purpose"),
            runs.tenant,
            runs.conversation_id,
            runs.started_at,
            runs.finished_at,
            runs.outcome,
            runs.reason,
            risk.status.label("risk_status"),
            risk.level.label("risk_level"),
            risk.tier.label("risk_tier"),
            risk.confirmed.label("risk_confirmed"),
        )
        .select_from(trace_runs.outerjoin(risk_assessments, risk.trace_id == runs.trace_id))
        # Ids sort by start time, so the primary key orders the list and bounds dates.
        .order_by(runs.trace_id.desc())
    )
    if where.purpose is not None and where.purpose not in RUN_PURPOSES:
        raise UsageError(f"a run's purpose is one of {', '.join(RUN_PURPOSES)}")
    if where.tenant is not None:
        require_tenant(where.tenant)
    for column, value in (
        (purpose, where.purpose),
        (runs.kind, where.kind),
        (runs.tenant, where.tenant),
        (runs.reason, where.reason),
        (runs.outcome, where.outcome),
        (runs.conversation_id, where.conversation_id),
    ):
        if value is not None:
            query = query.where(column == value)
    if where.risk_level in _NO_LEVEL:
        query = query.where(risk.status == where.risk_level)
    elif where.risk_level is not None:
        query = query.where(risk.level == where.risk_level)
    if where.since is not None:
        query = query.where(runs.trace_id >= _id_floor(where.since))
    if where.until is not None:
        query = query.where(runs.trace_id < _id_floor(where.until))
    if where.before is not None:
        query = query.where(runs.trace_id < where.before)
    return query


def limited_list_query(where: RunFilter, limit: int) -> Select[Any]:
    """:func:`list_query` of at most ``limit`` runs (1 to :data:`MAX_LIST`).

    Raises:
        UsageError: ``limit`` is out of range, or ``where`` is not a filter (see
            :func:`list_query`).
    """
    if not 1 <= limit <= MAX_LIST:
        raise UsageError(f"limit must be between 1 and {MAX_LIST}, got {limit}")
    return list_query(where).limit(limit)


def summary_of(row: Any) -> RunSummary:
    """The summary of one row of :func:`list_query`."""
    return RunSummary(
        trace_id=row.trace_id,
        kind=row.kind,
        purpose=row.purpose,
        tenant=row.tenant,
        conversation_id=row.conversation_id,
        started_at=row.started_at,
        finished_at=row.finished_at,
        outcome=row.outcome,
        reason=row.reason,
        risk_status=row.risk_status,
        risk_level=row.risk_level,
        risk_tier=row.risk_tier,
        risk_confirmed=row.risk_confirmed,
    )
