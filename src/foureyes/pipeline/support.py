"""The support-message pipeline: triage and the release gate, composed, for one message.

::

    start the run ─▶ L0 at once ─▶ L1/L2 when L0 escalates ─▶ policy (+ floor)
                        └─ not escalated: Counselor's first draft (speculative) ─┤
                                                                          ▼
                          gate: review, revise, decide (a prohibition discards the draft)
                                                                          ▼
           guardian alert considered (confirmed triage only, in the background)
                                                                          ▼
              one commit: every event of the run, the delivery record, the outcome
                                                                          ▼
                                                              the reply may leave

With ``gate.speculative_draft`` (the default) the Counselor's first draft starts at once
when the keyword gate (L0, microseconds) did not escalate the message; the draft does not
depend on the policy, only what is done with it does. A message L0 escalated is drafted
only once triage has set its policy, so a crisis that triage prohibits never reaches the
Counselor's endpoint (invariant 2).

:meth:`SupportPipeline.check` runs the same path for a draft the caller already has (its
text and tool calls, :class:`~foureyes.gate.GivenDraft`): the same triage, floor, alert
and single commit, but no Counselor: once triage has set the policy, the gate judges the
given draft (rules, then the independent Supervisor, by the digest of text and tool
calls) without revising it. A rejected draft falls back; a prohibition never lets the
caller's draft out; a restricted policy adds the code-rendered resources to it.

:meth:`SupportPipeline.guard` (the gateway's guard mode) is the same check on a draft the
team's own model writes: the client's request, as it is, goes to the ``counselor`` route
in place of the Counselor's prompt, speculatively like a Counselor draft when L0 did not
escalate, else only once triage allows generation (a prohibited message never reaches
the team's model), and its reply, text and tool calls, is judged without revision.

The whole run is recorded in one trace whose events are held in memory and committed in
one transaction before :meth:`SupportPipeline.handle` returns (invariant 10). A store
that cannot be written raises :class:`~foureyes.core.errors.StoreError`: nothing may be
delivered then. Every other expected failure is a reason code in the outcome.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from foureyes.config import Config
from foureyes.core.errors import StoreError
from foureyes.core.reasons import ReasonCode
from foureyes.core.tenancy import new_conversation_id, scoped_conversation
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.gate import GateOutcome, GateRunner, GivenDraft, PendingReply, ReplyRequest
from foureyes.gate.runner import SegmentSink
from foureyes.inputs.stage import flagging_run
from foureyes.llm import telemetry
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import ChatRequest
from foureyes.llm.routes import Routes
from foureyes.pipeline._buffer import EventObserver, HeldTraces
from foureyes.pipeline._inputs import InputStage, PreparedInput
from foureyes.pipeline.floor import AppliedPolicy, apply_floor
from foureyes.pipeline.outcome import (
    CallRecord,
    PipelineTimings,
    SupportMessage,
    SupportOutcome,
    delivery_record,
)
from foureyes.risk.assess import Turn as RiskTurn
from foureyes.risk.guardian import AlertOutcome, GuardianAlerts
from foureyes.risk.l0 import L0Gate
from foureyes.risk.notifiers import build_notifier
from foureyes.risk.resources import ResourceRegistry, configured_registry
from foureyes.risk.result import TriageResult
from foureyes.risk.triage import Triage, TriageRequest
from foureyes.store import Store

__all__ = ["CHECK_RUN_KIND", "GUARD_RUN_KIND", "RUN_KIND", "RunSegmentSink", "SupportPipeline"]

RunSegmentSink = Callable[[str, str], Awaitable[None]]
"""Takes the run's trace id and each approved segment of a segment release, in order."""

RUN_KIND = "support_message"
"""The trace ``kind`` of a pipeline run."""
CHECK_RUN_KIND = "draft_check"
"""The trace ``kind`` of a run that checks a caller's own draft (:meth:`SupportPipeline.check`)."""
GUARD_RUN_KIND = "guard_message"
"""The trace ``kind`` of a run judging the team's model's draft (:meth:`SupportPipeline.guard`)."""

_log = logging.getLogger(__name__)


def _alert_json(outcome: AlertOutcome) -> dict[str, Any]:
    return {
        "status": outcome.status.value,
        "reason": None if outcome.reason is None else outcome.reason.value,
        "attempt_id": outcome.attempt_id,
    }


class SupportPipeline:
    """Answers support messages: one instance per process, one :meth:`handle` per message."""

    def __init__(
        self,
        config: Config,
        routes: Routes,
        store: Store,
        *,
        alerts: GuardianAlerts | None = None,
        l0: L0Gate | None = None,
        registry: ResourceRegistry | None = None,
        observer: EventObserver | None = None,
    ) -> None:
        """Compose triage and the gate over ``routes`` and ``store``.

        Args:
            config: the effective configuration (``[gate]``, ``[risk]``).
            routes: the built routes; closing them stays the caller's job.
            store: the open store: traces, ledger, assessments, unknowns.
            alerts: the guardian-alert service; ``None``: alerts are off (what a
                confirmed triage would have met is recorded as ``disabled``).
            l0: the keyword gate (the packaged lexicon by default).
            registry: the crisis-resource registry (by default the one ``[risk]
                resources_file`` configures, else the packaged one).
            observer: called with every trace event of the pipeline's runs as it is
                appended (metrics); what it raises is logged and changes nothing.

        Raises:
            ConfigError: ``gate.extra_rules`` redefines a built-in rule, or the
                ``[risk] resources_file`` is missing or malformed.
        """
        if registry is None:
            registry = configured_registry(config.risk)
        self.registry = registry
        """The crisis-resource registry the gate and rendered resources use."""
        self.config = config
        self._traces = HeldTraces(store.traces, observer=observer)
        self.caller = ModelCaller(routes, ledger=store.ledger, trace=self._traces)
        """The metered caller every role of the pipeline calls through."""
        self.triage = Triage(
            config,
            self.caller,
            store.assessments,
            l0 or L0Gate.default(),
            trace=self._traces,
            hold_quiet_records=True,
        )
        """The triage of each message."""
        self.gate = GateRunner(
            self.caller, traces=self._traces, unknowns=store.unknowns, registry=registry
        )
        """The release gate."""
        self._runs = store.traces
        self.inputs = InputStage(config)
        """The ``[input]`` stage: every input judged before anything is drafted."""
        self._alerts = alerts
        self._alerting: set[asyncio.Task[AlertOutcome]] = set()

    @staticmethod
    def alerts_for(config: Config, store: Store) -> GuardianAlerts | None:
        """The guardian-alert service ``risk.alert`` configures; ``None`` without a target.

        Raises:
            ConfigError: the notifier cannot be built.
        """
        if not config.risk.alert.target:
            return None
        return GuardianAlerts(config.risk.alert, store.alerts, build_notifier(config.risk.alert))

    async def handle(
        self, message: SupportMessage, *, on_segment: RunSegmentSink | None = None
    ) -> SupportOutcome:
        """Triage ``message``, answer it through the gate, and record everything.

        Returns only once the run's record is committed. With ``on_segment`` and
        ``[gate] release = "segments"``, a reply triage allows in full (``normal``) is
        released in segments: before each approved segment is passed to ``on_segment``
        (with the run's trace id), everything recorded so far (triage, model calls, the
        segment's record) is written durably; the outcome's text then starts with the
        segments passed on. There is no speculative draft then (the draft streams once the
        policy is known).

        Raises:
            StoreError: the run could not be recorded; nothing may be delivered.
        """
        return await self._run(message, None, on_segment=on_segment)

    async def check(self, message: SupportMessage, draft: GivenDraft) -> SupportOutcome:
        """Triage ``message``, judge the caller's ``draft`` through the gate, record everything.

        Nothing is drafted and the draft is not revised: the outcome's text is the draft
        as released (with the code-rendered resources a restricted policy requires), or
        the fallback; its ``tool_calls`` are the draft's only when released. Returns only
        once the run's record is committed.

        Raises:
            StoreError: the run could not be recorded; nothing may be delivered.
        """
        return await self._run(message, draft)

    async def guard(self, message: SupportMessage, request: ChatRequest) -> SupportOutcome:
        """Triage ``message``, have the team's model answer ``request``, judge that draft.

        ``request`` is the client's own (its system prompt, history, tools), role
        ``counselor``: it goes as it is to the ``counselor`` route through the metered
        caller, never when triage prohibits generation. The reply is judged like a draft
        given to :meth:`check` (not revised; its tool calls delivered only when released).
        Returns only once the run's record is committed.

        Raises:
            StoreError: the run could not be recorded; nothing may be delivered.
        """
        return await self._run(message, None, own_request=request)

    async def _run(
        self,
        message: SupportMessage,
        given: GivenDraft | None,
        *,
        own_request: ChatRequest | None = None,
        on_segment: RunSegmentSink | None = None,
    ) -> SupportOutcome:
        if self.config.gate.release != "segments":
            on_segment = None
        speculative = self.config.gate.speculative_draft and given is None and on_segment is None
        if own_request is not None:
            kind, operation = GUARD_RUN_KIND, "foureyes.guard_message"
        elif given is None:
            kind, operation = RUN_KIND, "foureyes.support_message"
        else:
            kind, operation = CHECK_RUN_KIND, "foureyes.draft_check"
        started_wall = dt.datetime.now(dt.UTC)
        started = time.perf_counter()
        # The inputs are judged first: what the store keeps and what any model sees is the
        # message as the stage leaves it (personal data masked, injected material withheld).
        prepared = self.inputs.prepare(message, own_request)
        if prepared is not None:
            message, own_request = prepared.message, prepared.own_request
        # Reserved, not written: the first record that names the run writes its header
        # in the same transaction (the triage's assessment when L0 escalated; otherwise
        # the triage's record is held too, and the final commit writes all three).
        trace_id = await self._traces.start_held_run(
            kind,
            reserve=True,
            conversation_id=message.conversation_id,
            input_text=message.text,
            meta={
                "tenant": message.tenant,
                "purpose": message.purpose.value,
                "speculative_draft": speculative,
                "conversation_named": message.conversation_id is not None,
                "earlier_turns": len(message.history),
                "given_draft": given is not None,
                "own_model": own_request is not None,
                "input_checks": prepared is not None,
            },
        )
        try:
            with telemetry.operation_span(
                operation, trace_id=trace_id, speculative_draft=speculative
            ) as span:
                outcome = await self._answer(
                    message,
                    trace_id,
                    started,
                    started_wall,
                    speculative,
                    given,
                    own_request,
                    on_segment,
                    prepared,
                )
                span.annotate(
                    decision=outcome.decision.value,
                    reason=outcome.reason.value,
                    policy=outcome.policy.policy.value,
                    risk_tier=outcome.triage.tier.value,
                    risk_status=outcome.triage.status.value,
                )
                # Invariant 10: the whole record is durable before the text is returned.
                await self._traces.commit(
                    trace_id,
                    delivery_record(
                        outcome, conversation_named=message.conversation_id is not None
                    ),
                    outcome=outcome.decision.value,
                    reason=outcome.reason.value,
                )
        except StoreError:
            # Invariant 10: what could not be recorded is not delivered; the caller gets
            # the error, never the text.
            self._traces.drop(trace_id)
            raise
        except BaseException as exc:
            await self._record_failure(trace_id, exc)
            raise
        finally:
            if prepared is not None:
                await prepared.cancel()
        return outcome

    async def _answer(
        self,
        message: SupportMessage,
        trace_id: str,
        started: float,
        started_wall: dt.datetime,
        speculate_allowed: bool,
        given: GivenDraft | None,
        own_request: ChatRequest | None,
        on_segment: RunSegmentSink | None,
        prepared: PreparedInput | None,
    ) -> SupportOutcome:
        conversation = message.conversation_id or new_conversation_id()
        request = self._reply_request(message)
        if prepared is not None:
            turns = self.config.input.flag_turns
            # The flag restricts tool calls, so it is read only where the reply may carry
            # some: a team model offered tools, or a given draft that calls them.
            tools = (own_request is not None and bool(own_request.tools)) or (
                given is not None and bool(given.tool_calls)
            )
            if turns and tools and message.conversation_id is not None:
                # As a crisis keeps its state: an attack restricts the next few messages.
                events = await self._runs.recent_events(
                    message.tenant, message.conversation_id, EventKind.INPUT, runs=turns
                )
                prepared.flag(flagging_run(events))
            if prepared.blocks_now:
                speculate_allowed = False
            else:
                prepared.start_model_check(
                    self.caller, trace_id=trace_id, deadline_s=self.config.gate.deadline_s
                )
            if not prepared.model_pending:
                # Decided by code alone, recorded first: the rest of the run follows it.
                await self._traces.append(trace_id, prepared.event(prepared.deterministic))
        screening = self.triage.screen(
            TriageRequest(
                text=message.text,
                conversation_id=conversation,
                tenant=message.tenant,
                # Triage reads what people wrote: tool results are not the user's words.
                history=[
                    RiskTurn(t.role, t.text)
                    for t in message.history
                    if t.role != "tool" and t.text.strip()
                ],
                purpose=message.purpose,
                trace_id=trace_id,
            )
        )
        # A message on its way to L1 for a reason of its own (L0 escalated it or an earlier
        # turn, its language is not screened, risk.l1_policy sends it) goes to no Counselor
        # before triage has set its policy: it may be a crisis whose generation triage
        # prohibits (invariant 2). One L1 reads only because every message is read is
        # drafted meanwhile; a prohibition cancels that draft or discards it unread.
        speculate = speculate_allowed and not screening.holds_draft
        pending: PendingReply | None = None
        if speculate:
            pending = self.gate.begin(
                request, trace_id=trace_id, speculate=True, own_request=own_request
            )
        try:
            triage = await self.triage.finish(screening)
            decision = None if prepared is None else await prepared.decide()
        except BaseException:
            if pending is not None:
                await pending.discard()
            raise
        refused: ReasonCode | None = None
        if prepared is not None and decision is not None:
            if prepared.model_pending:
                await self._traces.append(trace_id, prepared.event(decision))
            refused = decision.reason if decision.blocks else None
            withheld, withheld_request = prepared.withheld(decision)
            if withheld is not message or refused is not None:
                # The model check strips what the draft under way has read, or blocks:
                # that draft is dropped unread, and any new one reads only what is left.
                if pending is not None:
                    await pending.discard()
                    pending = None
                message, own_request = withheld, withheld_request
                request = self._reply_request(message)
        triage_ms = (time.perf_counter() - started) * 1000
        applied = apply_floor(triage)
        alerting = self._consider_alert(triage)
        if pending is None:
            pending = self.gate.begin(
                request,
                trace_id=trace_id,
                speculate=False,
                given=given,
                own_request=None if refused is not None else own_request,
            )
        durable: SegmentSink | None = None
        early: asyncio.Future[None] | None = None
        if on_segment is not None:
            sink = on_segment
            if refused is None and pending.streams_segments(applied.policy):
                # The header, the input checks and the triage are written while the first
                # segment is drafted and reviewed, so that only the segment's own record
                # is written between its approval and its release (issue 39, item 4).
                early = asyncio.ensure_future(self._traces.flush(trace_id))

            async def durable(segment: str) -> None:
                # Invariant 10: the segment's record is durable before the segment leaves.
                if early is not None:
                    await early
                await self._traces.flush(trace_id)
                await sink(trace_id, segment)

        try:
            gate = await pending.finish(
                applied.policy,
                on_segment=durable,
                refused=refused,
                no_tool_calls=decision is not None and decision.restricts_tools,
            )
        finally:
            if early is not None:
                # Never two writes of one run at once: the commit waits for this one. What
                # it failed to write stays held, and the commit writes it (or fails too).
                await asyncio.gather(early, return_exceptions=True)
        return self._outcome(
            gate,
            trace_id=trace_id,
            conversation=conversation,
            triage=triage,
            applied=applied,
            alerting=alerting,
            started=started,
            started_wall=started_wall,
            triage_ms=triage_ms,
            speculate=speculate,
        )

    def _reply_request(self, message: SupportMessage) -> ReplyRequest:
        return ReplyRequest(
            message=message.text,
            history=message.history,
            # The gate keeps open unknowns by this key: the conversation under its tenant
            # (none for a conversation of one message, which no later message continues).
            conversation_id=None
            if message.conversation_id is None
            else scoped_conversation(message.tenant, message.conversation_id),
            region=message.region,
            locale=message.locale,
            sources=message.sources,
        )

    def _outcome(
        self,
        gate: GateOutcome,
        *,
        trace_id: str,
        conversation: str,
        triage: TriageResult,
        applied: AppliedPolicy,
        alerting: asyncio.Task[AlertOutcome] | None,
        started: float,
        started_wall: dt.datetime,
        triage_ms: float,
        speculate: bool,
    ) -> SupportOutcome:
        total_ms = (time.perf_counter() - started) * 1000
        calls = tuple(
            CallRecord.of_event(event, started_wall)
            for event in self._traces.held(trace_id)
            if event.kind is EventKind.MODEL_CALL
        )
        return SupportOutcome(
            decision=gate.decision,
            reason=gate.reason,
            candidate_sha256=gate.candidate_sha256,
            delivered_sha256=gate.delivered_sha256,
            text=gate.text,
            tool_calls=gate.tool_calls,
            trace_id=trace_id,
            conversation_id=conversation,
            triage=triage,
            policy=applied,
            gate=gate,
            alert=self._alert_state(triage, alerting),
            calls=calls,
            timings=PipelineTimings.of(
                total_ms=total_ms, triage_ms=triage_ms, gate_ms=gate.timings.total_ms, calls=calls
            ),
            speculative=speculate,
        )

    def _consider_alert(self, triage: TriageResult) -> asyncio.Task[AlertOutcome] | None:
        """Start the guardian-alert evaluation of a confirmed triage, in the background.

        Only a confirmed triage can meet the preconditions (invariant 5), so no other is
        evaluated; the evaluation records itself in the alert records, and sending (with
        its retries) must not hold the reply back.
        """
        if self._alerts is None or not triage.confirmed:
            return None
        task = asyncio.ensure_future(self._alerts.consider(triage))
        self._alerting.add(task)
        task.add_done_callback(self._alert_done)
        return task

    def _alert_done(self, task: asyncio.Task[AlertOutcome]) -> None:
        self._alerting.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            _log.error("guardian alert evaluation failed: %s", type(error).__name__)

    def _alert_state(
        self, triage: TriageResult, task: asyncio.Task[AlertOutcome] | None
    ) -> dict[str, Any] | None:
        if not triage.confirmed:
            return None
        if self._alerts is None:
            return {"status": "blocked", "reason": "disabled", "attempt_id": None}
        assert task is not None
        if not task.done():
            return {"status": "pending", "reason": None, "attempt_id": None}
        if task.cancelled() or task.exception() is not None:
            return {"status": "failed", "reason": None, "attempt_id": None}
        return _alert_json(task.result())

    async def _record_failure(self, trace_id: str, error: BaseException) -> None:
        """Record what a run held when a bug (or a cancellation) ended it, if the store can."""
        event = TraceEvent(EventKind.ERROR, "pipeline", {"error": type(error).__name__})
        outcome = "cancelled" if isinstance(error, asyncio.CancelledError) else "error"
        try:
            await self._traces.commit(trace_id, event, outcome=outcome, reason=None)
        except Exception as exc:  # the original failure is the one to raise
            _log.warning("the failed run %s could not be recorded: %s", trace_id, exc)

    async def aclose(self) -> None:
        """Wait for guardian-alert evaluations still under way (call before closing the store)."""
        if self._alerting:
            await asyncio.gather(*self._alerting, return_exceptions=True)
