"""The gate's run: draft, check, review, decide, record, then deliver.

:meth:`GateRunner.reply` runs one reply through the gate:

1. the Counselor drafts (unless the policy prohibits generation: then nothing is drafted);
2. the rules checked in code run on the draft; a hit skips the review;
3. the Supervisor reviews that exact draft, by digest, from an input the orchestrator
   assembled (:mod:`foureyes.gate.review_input`);
4. on a rejection (or a rule hit) the Counselor may revise, at most ``gate.max_revisions``
   times, each revision a new digest reviewed afresh, all within ``gate.deadline_s`` and
   ``gate.max_calls``;
5. :func:`~foureyes.gate.gate.decide` decides; the gate mints the
   :class:`~foureyes.gate.release.Release`; an ``insufficient`` verdict's missing items
   are kept on the conversation as open unknowns, and a verdict that judged the draft
   resolves the open unknowns it was shown and did not list again;
6. the decision record is appended to the trace (write-ahead, invariant 10), and only
   then is the release delivered and the outcome returned.

A caller that learns the policy later (the support pipeline, whose triage runs
meanwhile) splits this in two: :meth:`GateRunner.begin` starts the first draft at once,
and :meth:`PendingReply.finish` takes the policy and does the rest. Under a prohibition
the speculative draft is cancelled, or discarded unread, and the code-rendered crisis
reply goes out (invariant 2).

A draft the caller already has (:class:`~foureyes.gate.candidate.GivenDraft`, text and
tool calls) goes through the same run with ``begin(..., given=draft)``: no Counselor is
called, the draft is not revised, and the rules, the Supervisor and :func:`decide` judge
it by the digest of its text and tool calls together. A released candidate delivers
exactly those tool calls; a fallback delivers none. With ``begin(..., own_request=...)``
(guard mode) the team's own model drafts from the client's own request instead of the
Counselor's prompt, speculatively or not, and its reply (text and tool calls) is judged
the same way, without revision.

Every expected failure becomes a reason code through the stage tables of
:mod:`foureyes.gate.failures`; only store failures and bugs propagate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from foureyes.core.budget import utc_day
from foureyes.core.deadline import Clock
from foureyes.core.digest import Proposal, sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale, detect_locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.core.trace import EventKind, TraceEvent, TraceWriter
from foureyes.gate import offline as _offline  # noqa: F401  (registers the offline Supervisor)
from foureyes.gate._run import Run, usable_verdict
from foureyes.gate.candidate import GivenDraft, ToolCall
from foureyes.gate.fallback import FallbackTexts, ReplyMode, load_fallback_texts
from foureyes.gate.gate import Decision, ToolCallCheck, check_tool_calls, decide
from foureyes.gate.outcome import Attempt, GateOutcome, decision_record
from foureyes.gate.release import CrisisReply, compose_release, crisis_reply, deliver
from foureyes.gate.request import OpenUnknowns, ReplyRequest
from foureyes.gate.rules import RuleCatalogue, RuleContext
from foureyes.gate.segments import SegmentStep, with_continuation
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import ChatRequest
from foureyes.risk.resources import ResourceRegistry, default_registry, stale_entries
from foureyes.risk.result import RunPurpose

__all__ = [
    "GateRunner",
    "PendingReply",
    "RUN_KIND",
    "SegmentSink",
]

SegmentSink = Callable[[str], Awaitable[None]]
"""Takes each approved segment of a segment release, in order, to send it on."""

RUN_KIND = "gate_reply"
"""The trace ``kind`` of a run the gate starts itself."""

_log = logging.getLogger(__name__)


class GateRunner:
    """Answers user messages through the gate: the one path from a model to a user.

    One instance serves a process; per-reply state lives in the run.
    """

    def __init__(
        self,
        caller: ModelCaller,
        *,
        traces: TraceWriter,
        unknowns: OpenUnknowns | None = None,
        registry: ResourceRegistry | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        """Use ``caller`` for model calls and its config's ``[gate]`` section.

        Args:
            caller: the metered model caller; its routes' config supplies ``[gate]``.
            traces: where runs and decision records are written.
            unknowns: where open unknowns are kept; without it they are not carried.
            registry: the crisis-resource registry (the packaged one by default).
            clock: the monotonic clock deadlines are measured with.

        Raises:
            ConfigError: ``gate.extra_rules`` redefines a built-in rule, or the
                ``gate.texts_file`` is missing, malformed, or holds a text a rule refuses.
        """
        self._caller = caller
        self._gate = caller.routes.config.gate
        self._traces = traces
        self._unknowns = unknowns
        self._registry = registry or default_registry()
        self._clock = clock
        self.catalogue = RuleCatalogue.from_config(self._gate)
        """The rules in force."""
        self.texts: FallbackTexts | None = (
            None
            if self._gate.texts_file is None
            else load_fallback_texts(
                self._gate.texts_file,
                gate=self._gate,
                catalogue=self.catalogue,
                registry=self._registry,
            )
        )
        """The team's own fallback wording (``gate.texts_file``), checked by these rules."""
        self.stale_resources = stale_entries(
            self._registry, today=utc_day(), max_age_days=self._gate.resources_max_age_days
        )
        """Registry entries older than ``gate.resources_max_age_days``."""
        if self.stale_resources:
            _log.warning(
                "crisis resources not verified within %d days: %s",
                self._gate.resources_max_age_days,
                ", ".join(e.id for e in self.stale_resources),
            )

    def check_tool_calls(self, tool_calls: Sequence[ToolCall]) -> ToolCallCheck:
        """The rules in force on ``tool_calls`` alone (:func:`~foureyes.gate.check_tool_calls`).

        No model is called and nothing is recorded: a cheap check before a tool runs.

        Raises:
            UsageError: ``tool_calls`` is empty.
        """
        context = RuleContext.of_gate(self._gate, region=self._gate.region, registry=self._registry)
        return check_tool_calls(self.catalogue, context, tool_calls)

    def crisis_reply(
        self,
        locale: Locale,
        region: str | None = None,
        *,
        mode: ReplyMode,
    ) -> CrisisReply:
        """The crisis reply a prohibited run delivers in ``mode`` (no model, no record).

        ``region`` defaults to ``gate.region``; the wording is the team's where
        ``gate.texts_file`` gives it, and the code-rendered resources always follow it.
        """
        return crisis_reply(
            locale,
            region or self._gate.region,
            registry=self._registry,
            mode=mode,
            texts=self.texts,
        )

    def _locale_region(self, request: ReplyRequest) -> tuple[Locale, str | None]:
        locale = request.locale or (
            detect_locale(request.message) if self._gate.locale == "auto" else self._gate.locale
        )
        return locale, request.region or self._gate.region

    def begin(
        self,
        request: ReplyRequest,
        *,
        trace_id: str,
        speculate: bool,
        given: GivenDraft | None = None,
        own_request: ChatRequest | None = None,
    ) -> PendingReply:
        """Start answering ``request`` before its generation policy is known.

        The run's deadline and call budget start now. With ``speculate`` the Counselor's
        first draft (and the read of open unknowns) start at once, as tasks of the
        running event loop, so call this from a coroutine. ``request.policy`` is not
        read: the policy comes to :meth:`PendingReply.finish`.

        Args:
            request: the message and what the gate needs to know about it.
            trace_id: the run (already started) to record into; the caller finishes it.
            speculate: whether to draft now rather than once the policy is known.
            given: the caller's own draft, judged instead of a Counselor's; it is not
                revised, and there is nothing to speculate on.
            own_request: the client's own request (its role ``counselor``), sent as it
                is to the ``counselor`` route instead of the Counselor's prompt; the
                reply, text and tool calls, is judged without revision.

        Raises:
            UsageError: ``speculate`` with a ``given`` draft, or both ``given`` and
                ``own_request``.
        """
        if given is not None and speculate:
            raise UsageError("a given draft is not drafted, so not speculatively either")
        if given is not None and own_request is not None:
            raise UsageError("a draft is given or drafted by the team's model, not both")
        locale, region = self._locale_region(request)
        run = Run(
            caller=self._caller,
            gate=self._gate,
            catalogue=self.catalogue,
            unknowns=self._unknowns,
            registry=self._registry,
            clock=self._clock,
            request=request,
            trace_id=trace_id,
            locale=locale,
            region=region,
            given=given,
            own_request=own_request,
        )
        if speculate:
            run.speculate()
        return PendingReply(self, run)

    async def reply(
        self,
        request: ReplyRequest,
        *,
        trace_id: str | None = None,
        purpose: RunPurpose = RunPurpose.LIVE,
    ) -> GateOutcome:
        """Answer ``request``: the approved candidate, or a restricted fallback.

        Args:
            request: the message and what the gate needs to know about it.
            trace_id: a run already started (by the pipeline) to record into; without
                one the runner starts its own run and finishes it.
            purpose: why the runner's own run ran (kept in its meta: an evaluation's
                ``test`` runs are listed apart from live ones); unused with ``trace_id``.

        Raises:
            StoreError: the trace or the ledger could not be written; nothing was delivered.
        """
        own_run = trace_id is None
        if trace_id is None:
            locale, region = self._locale_region(request)
            trace_id = await self._traces.start_run(
                RUN_KIND,
                conversation_id=request.conversation_id,
                input_text=request.message,
                meta={
                    "policy": request.policy.value,
                    "locale": locale.value,
                    "region": region,
                    "purpose": purpose.value,
                },
            )
        outcome = await self.begin(request, trace_id=trace_id, speculate=False).finish(
            request.policy
        )
        if own_run:
            await self._traces.finish_run(
                trace_id, outcome=outcome.decision.value, reason=outcome.reason.value
            )
        return outcome


class PendingReply:
    """A reply under way whose policy is not known yet (from :meth:`GateRunner.begin`).

    Finish it with :meth:`finish` once triage has set the policy, or drop it with
    :meth:`discard`; either way exactly once.
    """

    def __init__(self, runner: GateRunner, run: Run) -> None:
        self._runner = runner
        self._run = run
        self._done = False

    @property
    def trace_id(self) -> str:
        """The run recorded into."""
        return self._run.trace_id

    def _close(self) -> None:
        if self._done:
            raise UsageError("a pending reply is finished or discarded only once")
        self._done = True

    async def discard(self) -> None:
        """Abandon the reply: cancel the speculative draft; nothing is decided or recorded.

        Raises:
            UsageError: the reply was already finished or discarded.
        """
        self._close()
        await self._run.discard()

    def streams_segments(self, policy: GenerationPolicy) -> bool:
        """Whether :meth:`finish` with ``on_segment`` releases this reply in segments.

        Only with ``[gate] release = "segments"``, a ``normal`` policy, the Counselor
        drafting (no given draft, not the team's own model) and no speculative draft.
        A restricted reply is released whole: its code-rendered resources belong with
        the reviewed text, not after a stream a reject may cut short.
        """
        run = self._run
        return (
            run.gate.release == "segments"
            and policy is GenerationPolicy.NORMAL
            and run.given is None
            and run.own_request is None
            and not run.speculated
        )

    async def finish(
        self,
        policy: GenerationPolicy,
        *,
        on_segment: SegmentSink | None = None,
        refused: ReasonCode | None = None,
        no_tool_calls: bool = False,
    ) -> GateOutcome:
        """Decide under ``policy``, record the decision, then deliver.

        Under a prohibition a speculative draft is cancelled, or discarded unread if it
        was written, and the code-rendered crisis reply goes out (invariant 2).

        With ``on_segment``, a reply that :meth:`streams_segments` is released in
        segments (:mod:`foureyes.gate.segments`): each approved segment's record (a
        ``verdict`` event, stage ``segment``) is appended, then the segment is passed to
        ``on_segment`` (which must make the record durable before the text leaves). The
        outcome's text is everything the reply delivers: the released segments, then the
        fallback continuation if the gate stopped; the decision record (appended before
        this returns) says which segments went out and why the stream ended.

        With ``refused`` (an input check blocked the message: ``input_blocked``,
        ``input_unchecked``) nothing is drafted and the fallback goes out with that reason,
        unless the policy prohibits generation (the crisis reply comes first). With
        ``no_tool_calls`` (a restricted input) a draft that calls tools falls back with
        ``input_restricted``.

        Raises:
            StoreError: the trace or the ledger could not be written; nothing was delivered.
            UsageError: the reply was already finished or discarded, or ``refused`` is
                ``approved``.
        """
        if refused is not None and not refused.is_fallback:
            raise UsageError("'approved' does not refuse a reply")
        if on_segment is not None and refused is None and self.streams_segments(policy):
            self._close()
            return await self._finish_segments(policy, on_segment)
        self._close()
        run, runner = self._run, self._runner
        attempts: list[Attempt] = []
        limit: ReasonCode | None = None
        candidate: Proposal[str] | None = None
        if policy.allows_generation and refused is None:
            try:
                attempts, limit, candidate = await run.attempts(policy)
            except BaseException:
                await run.discard()
                raise
            if no_tool_calls and run.tool_calls and limit is None:
                limit = ReasonCode.INPUT_RESTRICTED
        else:
            await run.discard()
            limit = refused
        last = attempts[-1] if attempts else None
        decision = decide(
            policy,
            candidate_sha256=last.candidate_sha256 if last else None,
            findings=last.findings if last else (),
            verdict=usable_verdict(last.review if last else None),
            failure=limit or (last.failure if last else None),
        )
        release = compose_release(
            decision,
            candidate.content if candidate is not None else None,
            policy=policy,
            locale=run.locale,
            region=run.region,
            registry=runner._registry,
            tool_calls=run.tool_calls,
            mode=_mode(run),
            texts=runner.texts,
        )
        added, resolved = await run.settle_unknowns(release.decision, last)
        record = decision_record(
            release=release,
            attempts=attempts,
            context=run.context(added, resolved, runner.stale_resources),
            usage=run.meter.usage(),
            timings=run.meter.timings(time.perf_counter() - run.started),
            limits=run.limits(),
        )
        # Invariant 10: the decision record is appended before any text is handed over
        # (a caller's buffering writer, the pipeline's, commits it before the text leaves).
        await runner._traces.append(run.trace_id, TraceEvent(EventKind.DECISION, "gate", record))
        delivery = deliver(release)
        return GateOutcome(
            decision=delivery.outcome,
            reason=delivery.reason,
            candidate_sha256=delivery.candidate_sha256,
            delivered_sha256=delivery.sha256,
            text=delivery.text,
            trace_id=run.trace_id,
            verdict=last.review.verdict if last and last.review else None,
            rules_fired=last.findings if last else (),
            attempts=tuple(attempts),
            timings=run.meter.timings(time.perf_counter() - run.started),
            usage=run.meter.usage(),
            policy=policy,
            locale=run.locale,
            region=run.region,
            tool_calls=delivery.tool_calls,
        )

    async def _finish_segments(
        self, policy: GenerationPolicy, on_segment: SegmentSink
    ) -> GateOutcome:
        run, runner = self._run, self._runner

        async def release(step: SegmentStep, segment: str) -> None:
            event = TraceEvent(EventKind.VERDICT, "segment", _step_json(step, "released"))
            await runner._traces.append(run.trace_id, event)
            await on_segment(segment)

        gate, attempts, decisions = await run.segments(policy, release)
        last = attempts[-1] if attempts else None
        if gate.stopped is None:
            decision = decisions[-1]
        else:
            decision = Decision.fallback(gate.stopped)
        minted = compose_release(
            decision,
            gate.released if gate.stopped is None else None,
            policy=policy,
            locale=run.locale,
            region=run.region,
            registry=runner._registry,
            mode=_mode(run),
            texts=runner.texts,
        )
        added, resolved = await run.settle_unknowns(minted.decision, last)
        delivery = deliver(minted)
        text = (
            delivery.text
            if gate.stopped is None
            else with_continuation(gate.released, delivery.text)
        )
        record = decision_record(
            release=minted,
            attempts=attempts,
            context=run.context(added, resolved, runner.stale_resources),
            usage=run.meter.usage(),
            timings=run.meter.timings(time.perf_counter() - run.started),
            limits=run.limits(),
        )
        record["delivered_sha256"] = sha256_hex(text)
        record["delivered_chars"] = len(text)
        record["segments"] = {
            "release": "segments",
            "released": [_step_json(step, "released") for step in gate.steps],
            "released_sha256": sha256_hex(gate.released),
            "stopped": None if gate.stopped is None else gate.stopped.value,
            "continuation": gate.stopped is not None and bool(gate.steps),
        }
        await runner._traces.append(run.trace_id, TraceEvent(EventKind.DECISION, "gate", record))
        review = last.review if last else None
        return GateOutcome(
            decision=delivery.outcome,
            reason=delivery.reason,
            candidate_sha256=delivery.candidate_sha256,
            delivered_sha256=sha256_hex(text),
            text=text,
            trace_id=run.trace_id,
            verdict=review.verdict if review else None,
            rules_fired=last.findings if last else (),
            attempts=tuple(attempts),
            timings=run.meter.timings(time.perf_counter() - run.started),
            usage=run.meter.usage(),
            policy=policy,
            locale=run.locale,
            region=run.region,
            tool_calls=(),
            segments=gate.steps,
        )


def _mode(run: Run) -> ReplyMode:
    """``guard`` when the draft is the caller's or its own model's, else ``support``."""
    if run.given is None and run.own_request is None:
        return ReplyMode.SUPPORT
    return ReplyMode.GUARD


def _step_json(step: SegmentStep, outcome: str) -> dict[str, Any]:
    return {
        "segment": step.index,
        "released_chars": step.released_chars,
        "chars": step.chars,
        "sha256": step.sha256,
        "outcome": outcome,
    }
