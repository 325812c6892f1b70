"""The crisis triage: L0 at once, L1 on a path to it, L2 when L1 says high or critical.

::

    screen: L0 (lexicon + learned scorer), language coverage, history, ``risk.l1_policy``
        │         ──no path to L1──▶ ok, low, tier L0 (no model call)
        │ a path to L1 (ScreenPath: l0, unscreened, history, always, scorer, conversation,
        │               every; crisis when the store holds the conversation in crisis)
    text too long? ─yes─▶ unknown (text_too_long)
    analysis running for this conversation? ─yes─▶ unknown (concurrency_drop), not queued
    L1 ──fails──▶ unknown (l1_timeout / l1_failed / l1_malformed / daily_cap / key_daily_cap /
        │                  budget / deadline)
        │ high or critical
    L2 (blind to L1) ──fails──▶ keep L1, not confirmed (l2_*)
        │
    double confirmation ──▶ level, confirmed, generation policy

A message in a language the screen does not cover (:func:`~foureyes.core.locale.is_covered`)
always goes to L1; it is ``unscreened`` (restricted, resources shown) unless a model, not
the offline assessor, assessed it. Under ``l1_policy = "screened"`` a message also goes to
L1 when the learned scorer's score reaches its language's lower ``screened`` threshold
(:attr:`ScreenPath.SCORER`), or when the conversation's recent light signals add up
(:func:`conversation_score`). Under ``"every"`` (the default), with a model route as
``risk_l1``, every message goes to L1 (:attr:`ScreenPath.EVERY`); past a daily limit such
a message is ``l0_only``.

A conversation in crisis (:func:`crisis_since` of its records, or an escalated user turn in
the request's history) sends every message to L1 with the turns before it, and keeps the
policy at least ``restricted`` until the models that read a message find it ``low`` with
no context flag.

Every failure degrades to ``unknown`` or to "not confirmed", never towards alerting
(docs/design.md 4, invariants 4 and 5). Every triage, dropped and failed ones included, is
recorded in the store with the HMAC of its text and its reasons. A store that cannot be
written makes the triage ``unknown`` and unconfirmed (``store_failed``): an outcome that
was not recorded alerts no one. The reply still gets the policy the triage computed (at
least ``restricted``): degradation goes towards fewer alerts and towards more restriction,
never the other way (:meth:`TriageResult.unrecorded
<foureyes.risk.result.TriageResult.unrecorded>`).

A conversation is kept under its tenant (:mod:`foureyes.core.tenancy`): the flight lease,
the daily limit, the trend and the records are keyed by the scoped conversation, and a
second daily limit counts every L1 assessment of the tenant, so neither a shared id nor
a fresh or rotated one reaches another tenant's state or escapes the tenant's cap.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from foureyes.config import Config
from foureyes.core.budget import CallBudget, SpendLimit, cost_usd, utc_day
from foureyes.core.deadline import Deadline
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import (
    BudgetExhausted,
    DeadlineExceeded,
    FoureyesError,
    RouteError,
    RouteTimeout,
    StoreError,
    UsageError,
)
from foureyes.core.locale import Locale, detect_locale, is_covered
from foureyes.core.policy import GenerationPolicy
from foureyes.core.roles import Role
from foureyes.core.tenancy import LOCAL_TENANT, scoped_conversation
from foureyes.core.trace import EventKind, TraceEvent, TraceWriter
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.provider import ChatRequest, ChatResult
from foureyes.llm.structured import ParseFailure, complete_structured
from foureyes.risk import offline as _offline  # noqa: F401  (registers the offline assessors)
from foureyes.risk.assess import Assessment, RiskReport, Tier, Turn, l1_request, l2_request
from foureyes.risk.confirm import Confirmation, combined_level, confirm, policy_for
from foureyes.risk.l0 import ESCALATION_THRESHOLD, L0Gate, L0Result
from foureyes.risk.levels import RiskLevel, RiskStatus
from foureyes.risk.result import RunPurpose, SuppressReason, TriageResult, l0_summary
from foureyes.risk.trend import Trend, compute_trend
from foureyes.store._clock import WallClock, utc_now
from foureyes.store.assessments import NewAssessment, SqlAssessmentLog, StoredAssessment

__all__ = [
    "FAILURE_REASONS",
    "ScreenPath",
    "Screening",
    "Triage",
    "TriageRequest",
    "conversation_score",
    "crisis_since",
    "l1_limit_key",
    "l1_tenant_limit_key",
    "outcome",
]

_log = logging.getLogger(__name__)

# A lease outlives the triage's deadline by this much, so it never expires mid-analysis.
_LEASE_SLACK_S = 5.0
# The recorded triages a crisis state is read from, newest first: past this many without
# an escalated or clearing one, the conversation is not in crisis.
_CRISIS_ROWS = 200

FAILURE_REASONS: dict[Tier, dict[type[FoureyesError], SuppressReason]] = {
    Tier.L1: {
        RouteTimeout: SuppressReason.L1_TIMEOUT,
        RouteError: SuppressReason.L1_FAILED,
        DeadlineExceeded: SuppressReason.DEADLINE,
        BudgetExhausted: SuppressReason.BUDGET,
    },
    Tier.L2: {
        RouteTimeout: SuppressReason.L2_TIMEOUT,
        RouteError: SuppressReason.L2_FAILED,
        DeadlineExceeded: SuppressReason.L2_DEADLINE,
        BudgetExhausted: SuppressReason.L2_BUDGET,
    },
}
"""The one table from a failed call's exception class to its reason, per tier (the most
specific class in the exception's ancestry wins). The per-conversation and per-tenant L1
limits are told apart from other budgets by the limit they name: ``daily_cap`` and
``key_daily_cap``."""

_MALFORMED = {Tier.L1: SuppressReason.L1_MALFORMED, Tier.L2: SuppressReason.L2_MALFORMED}


def l1_limit_key(conversation_key: str) -> str:
    """The spend-ledger key counting a conversation's L1 assessments per UTC day.

    ``conversation_key`` is the scoped conversation (:attr:`TriageRequest.conversation_key`).
    """
    return f"risk_l1:{sha256_hex(conversation_key)[:32]}"


def l1_tenant_limit_key(tenant: str) -> str:
    """The spend-ledger key counting a tenant's L1 assessments per UTC day."""
    return f"risk_l1_tenant:{sha256_hex(tenant)[:32]}"


@dataclass(frozen=True, slots=True)
class TriageRequest:
    """One message to triage."""

    text: str
    """The user's current message."""
    conversation_id: str
    """The conversation it belongs to, as the caller names it."""
    history: Sequence[Turn] = ()
    """Earlier turns, oldest first, from the request's own messages; L2 sees the last
    ``risk.context_turns`` of them. Nothing here is stored."""
    purpose: RunPurpose = RunPurpose.LIVE
    """Live traffic, a test or simulation, or a calibration run (kept apart)."""
    trace_id: str | None = None
    """A run already open to record in (the pipeline's); ``None``: the triage opens and
    closes a ``risk_triage`` run of its own."""
    tenant: str = LOCAL_TENANT
    """Whose conversation it is (:mod:`foureyes.core.tenancy`): ``key:<key id>`` for a
    caller with an API key. Single flight, the daily limits and the trend are the
    tenant's own."""

    @property
    def conversation_key(self) -> str:
        """The conversation's key in the store: ``conversation_id`` under ``tenant``."""
        return scoped_conversation(self.tenant, self.conversation_id)


class ScreenPath(StrEnum):
    """Why a screened message goes to L1 (the first that holds, in this order)."""

    L0 = "l0"
    """L0 escalated the message itself: its lexicon, or its learned scorer at the
    ``escalate`` threshold (:attr:`L0Result.signals <foureyes.risk.l0.L0Result.signals>`)."""
    UNSCREENED = "unscreened"
    """The message is in a language the screen does not cover; L0 cannot clear it."""
    ALWAYS = "always"
    """``risk.l1_policy = "always"``."""
    SCORER = "scorer"
    """``risk.l1_policy = "screened"``: the learned scorer's score of the message reaches
    the lower ``screened`` threshold of its language (below ``escalate``, where L0 itself
    escalates)."""
    CONVERSATION = "conversation"
    """``risk.l1_policy = "screened"``: the message's and the conversation's recent L0
    signals add up to the escalation threshold (:func:`conversation_score`)."""
    HISTORY = "history"
    """An earlier user turn of the request's own history (its last ``risk.context_turns``)
    escalates at L0: the client's history counts, not only what the store holds."""
    CRISIS = "crisis"
    """The conversation is in crisis in the store (:func:`crisis_since`): an escalated turn
    within ``risk.crisis_hold_hours`` that no model reading the conversation cleared."""
    EVERY = "every"
    """``risk.l1_policy = "every"`` with a model route as ``roles.risk_l1``: every user
    message, concurrently with the speculative draft."""


def _signal(gate: L0Gate, text: str, l0: L0Result) -> float:
    """One message's L0 signal in lexicon units, the higher of two readings.

    The lexicon's score, and the learned scorer's as a share of its escalation threshold
    times the lexicon's.
    """
    screen = gate.screen
    if screen is None or l0.screen_score is None:
        return l0.score
    scaled = ESCALATION_THRESHOLD * l0.screen_score / screen.threshold(text, "escalate")
    return max(l0.score, scaled)


def conversation_score(
    gate: L0Gate, current: L0Result, history: Sequence[Turn], turns: int, text: str = ""
) -> float:
    """The message's L0 signal plus those of the last ``turns`` user turns of ``history``.

    The seed's trend applied within one conversation: light signals spread over several
    messages, none escalating alone, add up. Each turn counts the higher of its lexicon
    score and its learned scorer's score (scaled so that the scorer's escalation
    threshold weighs as much as the lexicon's). Pure: L0 scans each of those turns again
    (microseconds each); nothing is stored. ``turns`` 0 counts the message alone.
    ``text`` is the current message (for the scorer's threshold of its language).
    """
    user = [turn.text for turn in history if turn.speaker == "user"]
    recent = user[-turns:] if turns else []
    return _signal(gate, text, current) + sum(_signal(gate, t, gate.scan(t)) for t in recent)


def _escalated(row: StoredAssessment) -> bool:
    """Whether a recorded triage escalated.

    A model said high or critical, or it was confirmed; or L0 escalated it (or an earlier
    turn of the request's history), unless the models that read it found it ``low`` with
    no context flag (a false escalation costs its own L1 call, not a day in crisis).
    """
    if row.confirmed or row.level in ("high", "critical"):
        return True
    l0 = row.detail.get("l0")
    screened = (isinstance(l0, dict) and l0.get("escalate") is True) or row.detail.get(
        "path"
    ) == ScreenPath.HISTORY.value
    return screened and not _cleared(row)


def _cleared(row: StoredAssessment) -> bool:
    """Whether a recorded triage is a model's ``low`` with no context flag, every tier."""
    if row.status != RiskStatus.OK.value or row.level != RiskLevel.LOW.value:
        return False
    assessed = [row.detail.get(tier) for tier in ("l1", "l2")]
    models = [a for a in assessed if isinstance(a, dict)]
    return bool(models) and all(
        a.get("offline") is False
        and a.get("level") == RiskLevel.LOW.value
        and not any((a.get("context_flags") or {}).values())
        for a in models
    )


def crisis_since(rows: Iterable[StoredAssessment]) -> dt.datetime | None:
    """When the conversation's crisis began, or ``None`` when it is not in crisis.

    ``rows`` are its recorded triages within the hold window, newest first. The newest
    that either escalated or cleared decides: an escalated one puts the conversation in
    crisis since it, a model's ``low`` with no context flag after it ends that. Pure.
    """
    for row in rows:
        if _escalated(row):
            return row.at
        if _cleared(row):
            return None
    return None


@dataclass(frozen=True, slots=True)
class Screening:
    """A message the keyword gate has screened, its triage not finished yet.

    From :meth:`Triage.screen`; finish it with :meth:`Triage.finish`. L0's verdict is
    known microseconds after the message arrives, so a caller can act on it (the support
    pipeline drafts speculatively only when L0 did not escalate) before L1 and L2 run.
    """

    request: TriageRequest
    """The message screened."""
    l0: L0Result
    """The keyword gate's result for ``request.text``."""
    locale: Locale
    """The message's language."""
    started: float
    """When the triage started (``time.monotonic()``), for its latency."""
    covered: bool = True
    """Whether the screen covers the message's language
    (:func:`~foureyes.core.locale.is_covered`)."""
    path: ScreenPath | None = None
    """Why L1 will assess the message; ``None``: it stops at L0."""

    @property
    def escalates(self) -> bool:
        """Whether L1 (and perhaps L2) will assess the message."""
        return self.path is not None

    @property
    def holds_draft(self) -> bool:
        """Whether no Counselor may draft before triage has set the policy.

        Every path to L1 but :attr:`ScreenPath.EVERY`: those messages may need more than
        L0 and may be a crisis whose generation triage prohibits. A message L0 cleared
        that L1 reads only because every message is read is drafted speculatively; should
        triage prohibit it, the draft is cancelled or discarded unread.
        """
        return self.path is not None and self.path is not ScreenPath.EVERY


@dataclass(frozen=True, slots=True)
class _Stage:
    assessment: Assessment | None
    reason: SuppressReason | None
    calls: tuple[ChatResult, ...] = ()
    parse_failure: ParseFailure | None = None


@dataclass(slots=True)
class _Run:
    """What one triage gathered so far (mutable while it runs, frozen into the result)."""

    l1: Assessment | None = None
    l2: Assessment | None = None
    trend: Trend | None = None
    reasons: list[SuppressReason] = field(default_factory=list)
    calls: list[ChatResult] = field(default_factory=list)
    tier: Tier = Tier.L0


class Triage:
    """Runs triages for one process: build it once, call :meth:`assess` per message."""

    def __init__(
        self,
        config: Config,
        caller: ModelCaller,
        log: SqlAssessmentLog,
        gate: L0Gate,
        *,
        trace: TraceWriter | None = None,
        clock: WallClock = utc_now,
        hold_quiet_records: bool = False,
    ) -> None:
        """Use ``caller`` for L1/L2 (it must have a ledger), ``log`` for records.

        With ``hold_quiet_records`` the record of a triage that L0 did not escalate, in a
        run the caller opened (``TriageRequest.trace_id``), is held for that run's next
        write instead of written at once (:meth:`SqlAssessmentLog.hold
        <foureyes.store.assessments.SqlAssessmentLog.hold>`): such a triage made no model
        call and cannot alert, so nothing acts on it outside the run, and the caller
        delivers nothing before its run is committed (the support pipeline, which saves
        a transaction per message this way).

        Raises:
            UsageError: ``caller`` has no spend ledger, so the per-conversation daily
                limit could not be kept.
        """
        if caller.ledger is None:
            raise UsageError("the triage needs a ModelCaller with a spend ledger")
        self.config = config
        self._caller = caller
        self._log = log
        self._gate = gate
        self._trace = trace if trace is not None else caller.trace
        self._clock = clock
        self._hold_quiet = hold_quiet_records
        self._l1_reads_every = (
            config.risk.l1_policy == "every" and config.route_for(Role.RISK_L1)[1].kind != "offline"
        )

    async def assess(self, request: TriageRequest) -> TriageResult:
        """Triage one message. Never raises for expected failures: they are reasons.

        The same as :meth:`finish` of :meth:`screen`.

        Raises:
            UsageError: a programming error (e.g. a naive clock).
        """
        return await self.finish(self.screen(request))

    def screen(self, request: TriageRequest) -> Screening:
        """Run the keyword gate (L0) on ``request``: microseconds, no I/O, nothing recorded."""
        started = time.monotonic()
        l0 = self._gate.scan(request.text)
        covered = is_covered(request.text)
        return Screening(
            request,
            l0,
            detect_locale(request.text),
            started,
            covered=covered,
            path=self._path(request, l0, covered=covered),
        )

    def _path(self, request: TriageRequest, l0: L0Result, *, covered: bool) -> ScreenPath | None:
        risk = self.config.risk
        if l0.escalate:
            return ScreenPath.L0
        if not covered:
            return ScreenPath.UNSCREENED
        if self._history_escalates(request.history):
            return ScreenPath.HISTORY
        if risk.l1_policy == "always":
            return ScreenPath.ALWAYS
        if risk.l1_policy == "screened":
            screen = self._gate.screen
            if (
                screen is not None
                and l0.screen_score is not None
                and l0.screen_score >= screen.threshold(request.text, "screened")
            ):
                return ScreenPath.SCORER
            score = conversation_score(
                self._gate, l0, request.history, risk.context_turns, request.text
            )
            if score >= ESCALATION_THRESHOLD:
                return ScreenPath.CONVERSATION
        if self._l1_reads_every:
            return ScreenPath.EVERY
        return None

    def _history_escalates(self, history: Sequence[Turn]) -> bool:
        turns = self.config.risk.context_turns
        if not turns:
            return False
        user = [turn.text for turn in history if turn.speaker == "user"][-turns:]
        return any(self._gate.scan(text).escalate for text in user)

    async def _in_crisis(self, request: TriageRequest) -> bool:
        """Whether the store holds the conversation in crisis (:func:`crisis_since`)."""
        now = self._clock()
        rows = await self._log.recent(
            request.conversation_key,
            purpose=request.purpose.value,
            since=now - dt.timedelta(hours=self.config.risk.crisis_hold_hours),
            limit=_CRISIS_ROWS,
        )
        return crisis_since(rows) is not None

    async def finish(self, screening: Screening) -> TriageResult:
        """Finish the triage L0 screened: L1 and L2 if it escalated; record the outcome.

        Never raises for expected failures: they are reasons.

        Raises:
            UsageError: a programming error (e.g. a naive clock).
        """
        request, l0 = screening.request, screening.l0
        run = _Run()
        trace_id = request.trace_id
        own_run = trace_id is None and self._trace is not None
        try:
            if own_run:
                assert self._trace is not None
                trace_id = await self._trace.start_run(
                    "risk_triage",
                    conversation_id=request.conversation_id,
                    input_text=request.text,
                    meta={"purpose": request.purpose.value, "tenant": request.tenant},
                )
            await self._event(trace_id, "l0", l0_summary(l0, with_terms=False))
            crisis = screening.path is ScreenPath.HISTORY or await self._in_crisis(request)
            if crisis and screening.path in (None, ScreenPath.EVERY):
                # Found after the screen (it needs the store): a draft already running for
                # the message goes on, and is discarded if triage prohibits the reply.
                screening = dataclasses.replace(screening, path=ScreenPath.CRISIS)
            if screening.escalates:
                await self._escalate(request, run, trace_id, crisis=crisis)
            result = self._result(screening, run, trace_id, crisis=crisis)
            row = _row(result, at=self._clock())
            if (
                self._hold_quiet
                and not own_run
                and trace_id is not None
                and not screening.escalates
            ):
                assessment_id = self._log.hold(row, text=request.text)
            else:
                assessment_id = await self._log.record(row, text=request.text)
            result = result.with_assessment_id(assessment_id)
            await self._event(trace_id, "triage", result.as_dict(with_evidence=False))
            if own_run and trace_id is not None and self._trace is not None:
                reason = result.reasons[0].value if result.reasons else None
                await self._trace.finish_run(trace_id, outcome=result.status.value, reason=reason)
            return result
        except StoreError as exc:
            # Invariants 4 and 5: an outcome that could not be recorded confirms nothing
            # (no alert), yet restricts the reply at least as much as it computed.
            _log.warning("triage of trace %s could not be recorded: %s", trace_id, exc)
            return self._result(screening, run, trace_id, crisis=False).unrecorded()

    async def _escalate(
        self, request: TriageRequest, run: _Run, trace_id: str | None, *, crisis: bool
    ) -> None:
        risk = self.config.risk
        if len(request.text) > risk.max_text_chars:
            # Never cut: a model judging part of a message would judge another message.
            run.reasons.append(SuppressReason.TEXT_TOO_LONG)
            return
        conversation = request.conversation_key
        token = await self._log.acquire_flight(
            conversation, now=self._clock(), ttl_s=risk.deadline_s + _LEASE_SLACK_S
        )
        if token is None:
            run.reasons.append(SuppressReason.CONCURRENCY_DROP)
            return
        try:
            scope = CallScope(Deadline.after(risk.deadline_s), CallBudget(risk.max_calls), trace_id)
            await self._analyse(request, run, scope, trace_id, crisis=crisis)
        finally:
            await self._release(conversation, token)

    async def _analyse(
        self,
        request: TriageRequest,
        run: _Run,
        scope: CallScope,
        trace_id: str | None,
        *,
        crisis: bool,
    ) -> None:
        risk = self.config.risk
        # Two counts, both taken by each assessment: the conversation's, and the tenant's,
        # which a fresh or rotated conversation id does not reset.
        limits = {
            SuppressReason.DAILY_CAP: SpendLimit(
                key=l1_limit_key(request.conversation_key), max_calls=risk.l1_daily_limit
            ),
            SuppressReason.KEY_DAILY_CAP: SpendLimit(
                key=l1_tenant_limit_key(request.tenant), max_calls=risk.l1_daily_limit_per_key
            ),
        }
        run.tier = Tier.L1
        context = list(request.history)[-risk.context_turns :] if risk.context_turns else []
        # In crisis L1 reads the conversation: only such a reading may end the crisis.
        l1_asked = l1_request(request.text, context if crisis else ())
        l1 = await self._stage(Tier.L1, l1_asked, scope, limits)
        run.calls += l1.calls
        await self._stage_event(trace_id, Tier.L1, l1)
        if l1.assessment is None:
            assert l1.reason is not None
            run.reasons.append(l1.reason)
            return
        run.l1 = l1.assessment
        if not l1.assessment.level.is_elevated:
            return
        today = utc_day(self._clock())
        first_day = today - dt.timedelta(days=risk.trend_days - 1)
        history = await self._log.levels_since(request.conversation_key, first_day)
        run.trend = compute_trend(
            ((day, RiskLevel(level)) for day, level in history), today=today, days=risk.trend_days
        )
        run.tier = Tier.L2
        l2 = await self._stage(Tier.L2, l2_request(request.text, context, run.trend), scope, {})
        run.calls += l2.calls
        await self._stage_event(trace_id, Tier.L2, l2)
        if l2.assessment is None:
            assert l2.reason is not None
            # L1 stands; without L2 nothing can be confirmed (invariant 5).
            run.reasons.append(l2.reason)
            return
        run.l2 = l2.assessment

    async def _stage(
        self,
        tier: Literal[Tier.L1, Tier.L2],
        request: ChatRequest,
        scope: CallScope,
        limits: Mapping[SuppressReason, SpendLimit],
    ) -> _Stage:
        role = Role.RISK_L1 if tier is Tier.L1 else Role.RISK_L2
        taken = tuple(limits.values())
        attempts = 0

        async def call(attempt: ChatRequest) -> ChatResult:
            nonlocal attempts
            attempts += 1
            # The daily limits count assessments, so only a stage's first call takes from them.
            return await self._caller.call(
                role,
                attempt,
                scope,
                stage=tier.value.lower(),
                limits=taken if attempts == 1 else (),
            )

        try:
            outcome = await complete_structured(call, request, RiskReport, retries=1)
        except (RouteError, BudgetExhausted, DeadlineExceeded) as exc:
            return _Stage(None, self._reason(tier, exc, limits))
        if not outcome.ok:
            return _Stage(None, _MALFORMED[tier], outcome.calls, outcome.reason)
        offline = outcome.calls[-1].offline
        assessment = Assessment(tier=tier, report=outcome.value, offline=offline)
        return _Stage(assessment, None, outcome.calls)

    @staticmethod
    def _reason(
        tier: Tier, exc: FoureyesError, limits: Mapping[SuppressReason, SpendLimit]
    ) -> SuppressReason:
        if isinstance(exc, BudgetExhausted):
            # The ledger names the exhausted limit "<key> daily calls".
            exhausted = exc.limit.partition(" ")[0]
            for reason, limit in limits.items():
                if exhausted == limit.key:
                    return reason
        table = FAILURE_REASONS[tier]
        for cls in type(exc).__mro__:
            if cls in table:
                return table[cls]
        raise UsageError(f"no reason code for {type(exc).__name__}")  # pragma: no cover

    async def _release(self, conversation_id: str, token: str) -> None:
        try:
            await self._log.release_flight(conversation_id, token)
        except StoreError as exc:
            # The lease expires on its own after the deadline; the triage's outcome stands.
            _log.warning("flight lease of a conversation was not released: %s", exc)

    async def _event(self, trace_id: str | None, stage: str, data: dict[str, object]) -> None:
        if trace_id is not None and self._trace is not None:
            await self._trace.append(trace_id, TraceEvent(EventKind.RISK, stage, data))

    async def _stage_event(self, trace_id: str | None, tier: Tier, stage: _Stage) -> None:
        data: dict[str, object] = {"attempts": len(stage.calls)}
        if stage.assessment is not None:
            data |= stage.assessment.summary(with_evidence=False)
        if stage.reason is not None:
            data["reason"] = stage.reason.value
        if stage.parse_failure is not None:
            # How the answer broke its contract, and what the endpoint said about its end.
            data["parse_failure"] = stage.parse_failure.value
            data["finish_reason"] = stage.calls[-1].finish_reason
        await self._event(trace_id, tier.value.lower(), data)

    def _result(
        self, screening: Screening, run: _Run, trace_id: str | None, *, crisis: bool
    ) -> TriageResult:
        request, l0 = screening.request, screening.l0
        confirmation: Confirmation | None = None
        if run.l1 is not None:
            confirmation = confirm(run.l1, run.l2, threshold=self.config.risk.confirm_confidence)
        capped = set(run.reasons) <= _DAILY_CAPS and bool(run.reasons)
        status, level = outcome(
            screening.escalates,
            screening.covered,
            run.l1,
            run.l2,
            l0_only=screening.path is ScreenPath.EVERY and capped,
        )
        confirmed = status is RiskStatus.OK and confirmation is not None and confirmation.confirmed
        policy = policy_for(level, confirmed=confirmed)
        if crisis and not _clears(run):
            policy = policy.stricter(GenerationPolicy.RESTRICTED)
        return TriageResult(
            conversation_id=request.conversation_id,
            purpose=request.purpose,
            status=status,
            level=level,
            confirmed=confirmed,
            tier=run.tier,
            policy=policy,
            reasons=tuple(run.reasons),
            locale=screening.locale,
            l0=l0,
            l1=run.l1,
            l2=run.l2,
            confirmation=confirmation,
            trend=run.trend,
            calls=len(run.calls),
            cost_usd=self._cost(run.calls),
            latency_ms=round((time.monotonic() - screening.started) * 1000, 3),
            trace_id=trace_id,
            tenant=request.tenant,
            covered=screening.covered,
            path=None if screening.path is None else screening.path.value,
            crisis=crisis,
        )

    def _cost(self, calls: Sequence[ChatResult]) -> float:
        total = 0.0
        for result in calls:
            route = self.config.routes.get(result.route)
            if route is None:
                continue
            total += cost_usd(
                result.usage.prompt_tokens,
                result.usage.completion_tokens,
                price_in=route.price_in or 0.0,
                price_out=route.price_out or 0.0,
            )
        return total


_DAILY_CAPS = frozenset({SuppressReason.DAILY_CAP, SuppressReason.KEY_DAILY_CAP})


def _clears(run: _Run) -> bool:
    """Whether this triage's model assessments, every one, say ``low`` with no flag."""
    models = [a for a in (run.l1, run.l2) if a is not None]
    return bool(models) and all(
        not a.offline and a.level is RiskLevel.LOW and not a.report.context_flags.any
        for a in models
    )


def outcome(
    to_l1: bool,
    covered: bool,
    l1: Assessment | None,
    l2: Assessment | None,
    *,
    l0_only: bool = False,
) -> tuple[RiskStatus, RiskLevel | None]:
    """A triage's status and level: pure, from what ran.

    ``l0_only``: the message went to L1 only because every message does, and a daily
    limit stopped L1: ``l0_only``, L0's ``low`` (never silently ``ok``).

    A message sent to L1 without an L1 assessment is ``unknown``; an uncovered message that
    no model assessed (none ran, or only the offline assessor, which reads no other
    language) is ``unscreened``; a covered one that L0 cleared is ``ok``, ``low``.
    """
    if to_l1 and l1 is None:
        if l0_only and covered:
            return RiskStatus.L0_ONLY, RiskLevel.LOW
        return RiskStatus.UNKNOWN, None
    modelled = [a for a in (l1, l2) if a is not None and not a.offline]
    if not covered and not modelled:
        return RiskStatus.UNSCREENED, None
    if l1 is None:
        return RiskStatus.OK, RiskLevel.LOW
    return RiskStatus.OK, combined_level(l1, l2)


def _row(result: TriageResult, *, at: dt.datetime) -> NewAssessment:
    """The row the store keeps of a triage: no text, no evidence, no matched terms."""
    detail = result.as_dict(with_evidence=False)
    for key in ("status", "level", "confirmed", "tier", "policy", "reasons", "trace_id"):
        detail.pop(key)
    return NewAssessment(
        conversation_id=result.conversation_key,
        purpose=result.purpose.value,
        at=at,
        status=result.status.value,
        level=None if result.level is None else result.level.value,
        tier=result.tier.value,
        confirmed=result.confirmed,
        policy=result.policy.value,
        reasons=[r.value for r in result.reasons],
        detail=detail,
        trace_id=result.trace_id,
    )
