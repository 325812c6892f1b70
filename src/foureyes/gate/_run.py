"""The state of one gate run: its limits, its meter, its drafts and reviews.

:class:`Run` is what :class:`~foureyes.gate.runner.GateRunner` drives for one reply. It
is split into a draft phase, which needs no policy and may start before triage has
decided one (:meth:`Run.speculate`), and a review-and-decide phase that takes the
policy (:meth:`Run.attempts`). A speculative draft that the policy turns out to forbid
is cancelled, or dropped unread if it already finished (:meth:`Run.discard`).

A run may instead judge a draft the caller already has (``given``): no Counselor is
called and the draft is not revised (it is not foureyes' to rewrite); the rules and the
Supervisor judge it, text and tool calls, under one digest.

Or a run may have the team's own model draft (``own_request``, guard mode): the client's
request goes as it is (its system prompt, history, tools) to the ``counselor`` role's
route through the same metered call, and that model's reply, text and tool calls, is
judged like a given draft: not revised, one digest for both. Its tool calls must be
strict JSON and finish with ``stop`` or ``tool_calls``; else the draft failed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from foureyes.config import GateConfig
from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Clock, Deadline
from foureyes.core.digest import Proposal, sha256_hex
from foureyes.core.errors import ContractError, FoureyesError, RouteTimeout
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.core.trace import PrivateText
from foureyes.gate._meter import Meter
from foureyes.gate.candidate import GivenDraft, ToolCall, ToolCallRefused
from foureyes.gate.counselor import DRAFT_SCHEMA, Revision, counselor_request, draft_reply
from foureyes.gate.failures import Stage, reason_for
from foureyes.gate.gate import Decision, decide
from foureyes.gate.outcome import Attempt
from foureyes.gate.request import KeptUnknown, OpenUnknowns, ReplyRequest
from foureyes.gate.review_input import assemble_review_input
from foureyes.gate.rules import RuleCatalogue, RuleContext
from foureyes.gate.segments import SegmentCutter, SegmentGate, SegmentStep
from foureyes.gate.supervisor import Review, review_candidate
from foureyes.gate.verdict import Verdict, VerdictDecision
from foureyes.llm import telemetry
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.provider import ChatRequest, TextDelta
from foureyes.llm.structured import ParseFailure, check_finished
from foureyes.risk.resources import ResourceRegistry

__all__ = ["Run", "SegmentRelease", "usable_verdict"]

SegmentRelease = Callable[[SegmentStep, str], Awaitable[None]]
"""Hands an approved segment over, once its record is appended (segment release)."""

_MAX_ERROR = 500
# A revision needs a draft and a review; with fewer calls left it cannot be judged.
_CALLS_PER_ATTEMPT = 2


def _private(text: str | None) -> PrivateText | None:
    return None if text is None else PrivateText(text)


def _error_text(error: FoureyesError) -> str:
    return f"{type(error).__name__}: {error}"[:_MAX_ERROR]


def _failed(n: int, failure: ReasonCode, error: str) -> Attempt:
    """Attempt ``n`` that has no candidate: its draft failed with ``failure``."""
    return Attempt(
        revision=n,
        candidate_sha256=None,
        candidate_chars=None,
        draft_route=None,
        findings=(),
        review=None,
        failure=failure,
        error=error[:_MAX_ERROR],
        reason=failure,
    )


def usable_verdict(review: Review | None) -> Verdict | None:
    """The verdict :func:`~foureyes.gate.gate.decide` may weigh, if any."""
    # A verdict naming other text is passed on, so decide() itself refuses the mismatch;
    # a verdict with unknown rules or spans outside the candidate is no verdict at all.
    if review is None or (review.problem is not None and review.problem.reason.is_review_failure):
        return None
    return review.verdict


@dataclass(frozen=True, slots=True)
class _Drafted:
    """A draft phase's result: a candidate, or the attempt that failed to write one."""

    candidate: Proposal[str] | None
    failed: Attempt | None


class Run:
    """The state of one reply (one instance per reply, never shared)."""

    def __init__(
        self,
        *,
        caller: ModelCaller,
        gate: GateConfig,
        catalogue: RuleCatalogue,
        unknowns: OpenUnknowns | None,
        registry: ResourceRegistry,
        clock: Clock,
        request: ReplyRequest,
        trace_id: str,
        locale: Locale,
        region: str | None,
        given: GivenDraft | None = None,
        own_request: ChatRequest | None = None,
    ) -> None:
        self.started = time.perf_counter()
        """When the run began (``perf_counter``), for its timings."""
        self.caller = caller
        self.gate = gate
        self.catalogue = catalogue
        self.unknowns = unknowns
        self.request = request
        self.trace_id = trace_id
        self.locale = locale
        self.region = region
        self.given = given
        """The caller's own draft, judged instead of a Counselor's (``None``: draft)."""
        self.own_request = own_request
        """The client's own request for its own model to draft from (guard mode)."""
        self._own_calls: tuple[ToolCall, ...] = ()
        self.scope = CallScope(
            Deadline.after(gate.deadline_s, clock=clock), CallBudget(gate.max_calls), trace_id
        )
        self.meter = Meter(caller, self.scope)
        self.open_unknowns: tuple[KeptUnknown, ...] = ()
        """The conversation's open unknowns, read once for the whole run."""
        self.speculation: dict[str, Any] | None = None
        """What became of a speculative first draft, for the record (``None``: none)."""
        self._unknowns_read: asyncio.Future[Sequence[KeptUnknown]] | None = None
        self._first: asyncio.Task[_Drafted] | None = None
        self.rules = RuleContext.of_gate(
            gate, region=region, registry=registry, tools_declared=_declared(own_request)
        )

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The candidate's tool calls: the given draft's, or the team's model's."""
        return self._own_calls if self.given is None else self.given.tool_calls

    def speculate(self) -> None:
        """Start the first draft and the open-unknowns read now, before any policy is known.

        The draft does not depend on the policy; only what is done with it does.
        """
        self._start_unknowns_read()
        self._first = asyncio.ensure_future(self._draft(0, None))
        self.speculation = {"state": "running"}

    @property
    def speculated(self) -> bool:
        """Whether a speculative first draft was started and not yet taken."""
        return self._first is not None

    async def discard(self) -> None:
        """Drop the speculative work: cancel what still runs, ignore what finished.

        Called when the policy forbids generation, or the reply is abandoned. What the
        draft had become (cancelled, written with its digest, failed) goes in the record;
        its text goes nowhere.
        """
        read, self._unknowns_read = self._unknowns_read, None
        first, self._first = self._first, None
        for task in (read, first):
            if task is not None and not task.done():
                task.cancel()
        pending = [task for task in (read, first) if task is not None]
        if pending:
            # wait() does not raise what the tasks raised; only our own cancellation.
            await asyncio.wait(pending)
        if read is not None and not read.cancelled():
            read.exception()  # retrieved: a read nobody needs may fail unnoticed
        if first is None:
            return
        state: dict[str, Any] = {"state": "cancelled", "discarded": True}
        if not first.cancelled():
            error = first.exception()
            if error is not None:
                state = {"state": "failed", "discarded": True, "error": type(error).__name__}
            elif (drafted := first.result()).candidate is not None:
                state = {
                    "state": "written",
                    "discarded": True,
                    "candidate_sha256": drafted.candidate.sha256,
                }
            else:
                failed = drafted.failed
                reason = failed.reason.value if failed is not None else None
                state = {"state": "failed", "discarded": True, "reason": reason}
        self.speculation = state

    async def attempts(
        self, policy: GenerationPolicy
    ) -> tuple[list[Attempt], ReasonCode | None, Proposal[str] | None]:
        """Draft and judge, revising while allowed; the attempts, any limit hit, the last draft."""
        if self._first is None:
            self._start_unknowns_read()
        attempts: list[Attempt] = []
        revision: Revision | None = None
        candidate: Proposal[str] | None = None
        # A given draft (or the team's model's) is judged as it is: revising it would
        # release words nobody asked for.
        fixed = self.given is not None or self.own_request is not None
        revisions = 0 if fixed else self.gate.max_revisions
        for n in range(revisions + 1):
            attempt, candidate = await self._attempt(n, revision, policy)
            attempts.append(attempt)
            retry = attempt.reason in (ReasonCode.REJECTED, ReasonCode.RULE_VIOLATION)
            if not retry or candidate is None or n == revisions:
                break
            if self.scope.deadline.expired:
                return attempts, ReasonCode.DEADLINE_EXCEEDED, candidate
            if self.scope.budget.remaining < _CALLS_PER_ATTEMPT:
                return attempts, ReasonCode.BUDGET_EXHAUSTED, candidate
            revision = self._revision(attempt, candidate)
        return attempts, None, candidate

    def _start_unknowns_read(self) -> None:
        conversation = self.request.conversation_id
        if self.unknowns is not None and conversation is not None:
            self._unknowns_read = asyncio.ensure_future(
                self.unknowns.open(conversation, limit=self.gate.max_open_unknowns)
            )

    @staticmethod
    def _revision(attempt: Attempt, candidate: Proposal[str]) -> Revision:
        violations = attempt.review.verdict.violations if attempt.review else ()
        broken = [f.rule for f in attempt.findings] + [v.rule for v in violations]
        return Revision(
            previous=candidate.content,
            broken=tuple(dict.fromkeys(broken)),
            notes=tuple(v.note for v in violations if v.note),
        )

    async def _attempt(
        self, n: int, revision: Revision | None, policy: GenerationPolicy
    ) -> tuple[Attempt, Proposal[str] | None]:
        try:
            if self.given is not None and self.given.unusable is not None:
                drafted = _Drafted(None, _failed(n, ReasonCode.DRAFT_FAILED, self.given.unusable))
            elif self.given is not None:
                drafted = _Drafted(self._given_proposal(self.given), None)
            elif n == 0 and self._first is not None:
                first, self._first = self._first, None
                drafted = await first
                self.speculation = {"state": "used"}
            else:
                drafted = await self._draft(n, revision)
        finally:
            await self._finish_unknowns_read()
        candidate = drafted.candidate
        if candidate is None:
            assert drafted.failed is not None
            return drafted.failed, None
        rules = dataclasses.replace(self.rules, restricted=policy is GenerationPolicy.RESTRICTED)
        findings = self.catalogue.check(candidate.content, rules, self.tool_calls)
        # Rules checked in code settle the candidate; a review would only spend a call.
        review, failure, error = (None, None, None) if findings else await self._review(candidate)
        decision = decide(
            policy,
            candidate_sha256=candidate.sha256,
            findings=findings,
            verdict=usable_verdict(review),
            failure=failure,
        )
        attempt = Attempt(
            revision=n,
            candidate_sha256=candidate.sha256,
            candidate_chars=len(candidate.content),
            draft_route=candidate.route,
            findings=findings,
            review=review,
            failure=failure,
            error=error,
            reason=decision.reason,
        )
        return attempt, candidate

    @staticmethod
    def _given_proposal(given: GivenDraft) -> Proposal[str]:
        """The given draft as the run's candidate: its text, bound to its whole digest."""
        return Proposal(
            content=given.text,
            sha256=given.sha256,
            role="caller",
            route="given",
            meta={"tool_calls": len(given.tool_calls)},
        )

    def _counselor_request(self, revision: Revision | None) -> ChatRequest:
        """The Counselor's request for this run's message (and ``revision``, if any)."""
        return counselor_request(
            self.request.message,
            self.request.history,
            catalogue=self.catalogue,
            locale=self.locale,
            max_chars=self.gate.max_chars,
            history_turns=self.gate.counselor_turns,
            revision=revision,
            open_unknowns=self.unknown_texts,
        )

    async def _draft(self, n: int, revision: Revision | None) -> _Drafted:
        """The draft phase of attempt ``n``: needs no policy, so it may run speculatively."""
        # The Counselor is shown what earlier reviews could not judge, so the reply can
        # ask rather than guess; a store that cannot be read fails the run (not a reason).
        await self._finish_unknowns_read()
        try:
            if self.own_request is not None:
                return _Drafted(await self._own_draft(self.own_request), None)
            request = self._counselor_request(revision)
            candidate = await draft_reply(self.meter.call(Stage.DRAFT), request)
        except FoureyesError as exc:
            failure = reason_for(
                Stage.DRAFT, exc, deadline_passed=self._deadline_cut(exc, Role.COUNSELOR)
            )
            if failure is None:
                raise
            return _Drafted(None, _failed(n, failure, _error_text(exc)))
        return _Drafted(candidate, None)

    async def _own_draft(self, request: ChatRequest) -> Proposal[str]:
        """The team's model's reply to the client's own request, as the candidate.

        Raises:
            ContractError: the reply did not finish normally, or a tool call is not strict
                JSON (or repeats an id): a draft that cannot be judged whole is no draft.
        """
        result = await self.meter.call(Stage.DRAFT)(request)
        check_finished(result, DRAFT_SCHEMA, tools_asked=bool(request.tools))
        text = result.text.strip()
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in result.tool_calls
        ]
        if not text and not calls:
            # Still a proposal: rule ``empty_text`` refuses it like any other candidate.
            return Proposal.of_text("", role=Role.COUNSELOR.value, route=result.route)
        try:
            draft = GivenDraft.of_openai(text, calls)
        except ToolCallRefused as exc:
            raise ContractError(DRAFT_SCHEMA, ParseFailure.INVALID_JSON, str(exc)) from None
        self._own_calls = draft.tool_calls
        return Proposal(
            content=draft.text,
            sha256=draft.sha256,
            role=Role.COUNSELOR.value,
            route=result.route,
            meta={"model": result.model, "offline": result.offline, "tool_calls": len(calls)},
        )

    def _deadline_cut(self, error: FoureyesError, role: Role) -> bool:
        """Whether the run's deadline, rather than the route, ended a failed call.

        A call's timeout is the route's, cut to the time the run has left; a timeout
        shorter than the route's own was the deadline's.
        """
        if self.scope.deadline.expired:
            return True
        _, route = self.caller.routes.config.route_for(role)
        return isinstance(error, RouteTimeout) and error.timeout_s < route.timeout_s

    async def _finish_unknowns_read(self) -> None:
        """Take the open unknowns read since the run began (once)."""
        if self._unknowns_read is not None:
            read, self._unknowns_read = self._unknowns_read, None
            self.open_unknowns = tuple(await read)

    @property
    def unknown_texts(self) -> tuple[str | None, ...]:
        """The open unknowns as prompts show them (``None``: its words are not kept)."""
        return tuple(unknown.words for unknown in self.open_unknowns)

    async def _review(
        self, candidate: Proposal[str]
    ) -> tuple[Review | None, ReasonCode | None, str | None]:
        """The review of ``candidate``: the review, a failure reason, and the error text."""
        review_input = assemble_review_input(
            message=self.request.message,
            history=self.request.history,
            candidate=candidate,
            sources=self.request.sources,
            open_unknowns=self.unknown_texts,
            counselor_summary=self.request.counselor_summary,
            history_turns=self.gate.history_turns,
            tool_calls=self.tool_calls,
        )
        try:
            review = await review_candidate(
                self.meter.call(Stage.REVIEW),
                review_input,
                self.catalogue,
                region=self.region,
                max_chars=self.gate.max_chars,
                retries=self.gate.verdict_retries,
            )
        except FoureyesError as exc:
            failure = reason_for(
                Stage.REVIEW, exc, deadline_passed=self._deadline_cut(exc, Role.SUPERVISOR)
            )
            if failure is None:
                raise
            telemetry.record_verdict(
                candidate_sha256=candidate.sha256, label=None, failure=failure.value
            )
            return None, failure, _error_text(exc)
        problem = review.problem
        telemetry.record_verdict(
            candidate_sha256=candidate.sha256,
            label=review.verdict.decision.value,
            failure=None if problem is None else problem.reason.value,
            verdict_sha256=review.verdict_sha256,
            route=review.route,
        )
        if problem is None:
            return review, None, None
        reason = problem.reason
        return review, reason if reason.is_review_failure else None, problem.detail

    async def settle_unknowns(
        self, decision: Decision, last: Attempt | None
    ) -> tuple[tuple[str, ...], int]:
        """Keep or resolve the conversation's open unknowns by the last verdict.

        An ``insufficient`` decision keeps the verdict's missing items open. A verdict that
        met its contract for the last draft and judged it (approve or reject) resolves
        every open unknown this run was shown that its ``missing`` does not list again
        (compared with whitespace collapsed and case folded); unknowns raised meanwhile by
        another run, or beyond ``gate.max_open_unknowns``, were not shown and stay open.
        No verdict (a rule hit, a failed or malformed review) resolves nothing.

        Returns:
            The missing items kept open, and how many unknowns were resolved.
        """
        conversation = self.request.conversation_id
        review = last.review if last is not None else None
        if self.unknowns is None or conversation is None or review is None:
            return (), 0
        if decision.reason is ReasonCode.INSUFFICIENT:
            raised = review.verdict.missing
            await self.unknowns.settle(conversation, trace_id=self.trace_id, raised=raised)
            return raised, 0
        judged = review.verdict.decision in (VerdictDecision.APPROVE, VerdictDecision.REJECT)
        if review.problem is not None or not judged or not self.open_unknowns:
            return (), 0
        resolved = await self.unknowns.settle(
            conversation,
            trace_id=self.trace_id,
            shown=[unknown.id for unknown in self.open_unknowns],
            listed=review.verdict.missing,
        )
        return (), resolved

    def context(
        self, added: tuple[str, ...], resolved: int, stale: Sequence[Any]
    ) -> dict[str, Any]:
        """What the review was based on, for the decision record.

        Unknowns are model-written: the record holds them as private text (``None`` for
        one whose words the store no longer has).
        """
        history = self.request.history
        shown = min(len(history), self.gate.history_turns)
        return {
            "earlier_turns_shown": shown,
            "earlier_turns_omitted": len(history) - shown,
            "sources": [
                {"id": s.id, "origin": s.origin, "sha256": sha256_hex(s.text)}
                for s in self.request.sources
            ],
            "open_unknowns": [_private(text) for text in self.unknown_texts],
            "unknowns_added": [PrivateText(text) for text in added],
            "unknowns_resolved": resolved,
            "counselor_summary": self.request.counselor_summary is not None,
            "rules": sorted(self.catalogue.ids),
            "stale_resources": [entry.id for entry in stale],
            "speculative_draft": self.speculation,
            "given_draft": self.given is not None,
            "own_model": self.own_request is not None,
            "tool_calls": [call.name for call in self.tool_calls],
        }

    def limits(self) -> dict[str, Any]:
        """The run's limits and what was used of them."""
        return {
            "deadline_s": self.gate.deadline_s,
            "elapsed_s": round(self.scope.deadline.elapsed(), 6),
            "max_calls": self.gate.max_calls,
            "calls_used": self.scope.budget.used,
            "max_revisions": self.gate.max_revisions,
        }

    async def segments(
        self, policy: GenerationPolicy, release: SegmentRelease
    ) -> tuple[SegmentGate, list[Attempt], list[Decision]]:
        """Draft with the text streamed; review and release each segment as it closes.

        Each closed segment is judged (rules in code, then the Supervisor) as the
        candidate "released so far + segment", by its digest; an approved one is handed to
        ``release`` (which records it, then sends it on) before the next is judged. The first
        segment not approved, or a draft that fails or is cut off, stops the gate; the
        draft is cancelled and nothing more is released. When only one review is left in
        the call budget, it waits for the draft to end and judges all the rest as one
        segment. There are no revisions: what was released cannot be rewritten.

        Returns:
            The gate (released text, steps, why it stopped), every segment's attempt, and
            every segment's decision, in order.
        """
        self._start_unknowns_read()
        await self._finish_unknowns_read()
        cutter = SegmentCutter(self.gate.segment_max_chars)
        # Segments as they close; ``None`` once the draft call has ended.
        closed: asyncio.Queue[str | None] = asyncio.Queue()
        started = False

        def on_text(piece: str) -> None:
            nonlocal started
            if not started:
                piece = piece.lstrip()
                started = bool(piece)
            for segment in cutter.feed(piece):
                closed.put_nowait(segment)

        draft = asyncio.ensure_future(self._streamed_draft(on_text))
        draft.add_done_callback(lambda _: closed.put_nowait(None))
        gate = SegmentGate()
        attempts: list[Attempt] = []
        decisions: list[Decision] = []

        def failed() -> Attempt | None:
            return draft.result() if draft.done() else None

        try:
            while True:
                item = await closed.get()
                final = item is None or self.scope.budget.remaining <= 1
                parts = [] if item is None else [item]
                if final and item is not None:
                    # The last review the budget allows judges the rest of the draft.
                    while (more := await closed.get()) is not None:
                        parts.append(more)
                if final:
                    parts.append("" if failed() else cutter.finish() or "")
                segment = "".join(parts).rstrip() if final else parts[0]
                if (failure := failed()) is not None:
                    gate.stop(failure.reason)
                    attempts.append(failure)
                    break
                if final and not segment and gate.steps:
                    break  # the draft ended on a segment already released
                decision, attempt = await self._judge_segment(gate, segment, policy)
                attempts.append(attempt)
                decisions.append(decision)
                if (failure := failed()) is not None:
                    # Cut off or failed while the segment was reviewed: not released.
                    gate.stop(failure.reason)
                    attempts.append(failure)
                    break
                step = gate.release(segment, decision)
                if step is None:
                    break
                await release(step, segment)
                if final:
                    break
        finally:
            if not draft.done():
                draft.cancel()
            await asyncio.wait([draft])
        return gate, attempts, decisions

    async def _streamed_draft(self, on_text: TextDelta) -> Attempt | None:
        """The Counselor's draft, streamed into ``on_text``; the failed attempt, if it failed."""
        request = self._counselor_request(None)
        try:
            result = await self.meter.call(Stage.DRAFT, on_text=on_text)(request)
            check_finished(result, DRAFT_SCHEMA)
        except FoureyesError as exc:
            failure = reason_for(
                Stage.DRAFT, exc, deadline_passed=self._deadline_cut(exc, Role.COUNSELOR)
            )
            if failure is None:
                raise
            return _failed(0, failure, _error_text(exc))
        return None

    async def _judge_segment(
        self, gate: SegmentGate, segment: str, policy: GenerationPolicy
    ) -> tuple[Decision, Attempt]:
        """Rules, then the Supervisor, on the released text plus ``segment``, by its digest."""
        route = self.caller.routes.config.roles.route_for(Role.COUNSELOR)
        cumulative = gate.candidate(segment, role=Role.COUNSELOR.value, route=route)
        findings = self.catalogue.check(cumulative.content, self.rules, ())
        review, failure, error = (None, None, None) if findings else await self._review(cumulative)
        decision = decide(
            policy,
            candidate_sha256=cumulative.sha256,
            findings=findings,
            verdict=usable_verdict(review),
            failure=failure,
        )
        attempt = Attempt(
            revision=0,
            candidate_sha256=cumulative.sha256,
            candidate_chars=len(cumulative.content),
            draft_route=route,
            findings=findings,
            review=review,
            failure=failure,
            error=error,
            reason=decision.reason,
        )
        return decision, attempt


def _declared(request: ChatRequest | None) -> tuple[str, ...] | None:
    """The function names ``request`` declares in ``tools``; ``None`` when it declares none.

    A request without tools gets no calls to judge: a model answer that calls tools
    anyway is no draft (``check_finished``).
    """
    if request is None or not request.tools:
        return None
    names = []
    for tool in request.tools:
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            names.append(name)
    return tuple(names)
