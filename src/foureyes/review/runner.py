"""The one reviewer runner, shared by every trigger (manual, automatic checkpoint, ensemble).

A run has a fixed lifecycle:

1. **start** one call of the ``reviewer`` role through
   :class:`~foureyes.llm.calls.ModelCaller` (deadline, call budget, spend ledger and a
   ``model_call`` trace event included), under the run's deadline;
2. **await** the first of: the answer, the deadline (plus a short grace for the route to
   report its own timeout), or the host's abort signal;
3. **dispose** of the call: whatever is still running is cancelled and awaited, so no
   reviewer call outlives its run.

Then, in this order, and the first that applies decides:

- **lifecycle**: an abort, a timeout, a route error, an exhausted budget or deadline, or
  an answer that did not complete normally
  (:func:`~foureyes.llm.structured.finish_failure`: a finish reason other than ``stop``,
  none at all, or tool calls) means *no packet*, whatever text the reviewer returned;
- **contract**: the answer text goes through :func:`~foureyes.review.packet.check_packet`.

A ``reviewer-persona`` run may be given read-only verification tools
(:class:`ReviewTools`): an answer that calls only those tools is not the end of the run;
their results go back to the reviewer, which is called again (at most
:data:`MAX_TOOL_ROUNDS` rounds, each a call of the run's budget). A call of any other
tool is still an incomplete answer, never carried out.

The outcome is a frozen :class:`ReviewOutcome` with one :class:`ReviewReason`; expected
failures are data, never exceptions (docs/design.md 4, invariant 4). Whether an accepted packet
is published is decided here too, by the run's
:class:`~foureyes.review.publication.PublicationPolicy`. The run is recorded in the trace
(kind ``review``): its model call, the packet by digest or the failure, and the decision
with its publication flag, all written before the outcome is returned, so a publication
can never precede its record (invariant 10); a run that cannot be recorded makes no call,
or publishes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Deadline
from foureyes.core.errors import (
    BudgetExhausted,
    DeadlineExceeded,
    FoureyesError,
    RouteError,
    RouteTimeout,
    StoreError,
    UsageError,
)
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult, Usage
from foureyes.llm.structured import finish_failure
from foureyes.review import offline as _offline  # noqa: F401  (registers the offline reviewer)
from foureyes.review.packet import PacketRejection, ReviewPacket, check_packet
from foureyes.review.publication import PublicationPolicy

__all__ = [
    "MAX_TOOL_ROUNDS",
    "REVIEW_RUN_KIND",
    "ReviewOutcome",
    "ReviewReason",
    "ReviewRunner",
    "ReviewTools",
    "ReviewTrigger",
    "reason_for_error",
]

REVIEW_RUN_KIND = "review"
"""The ``kind`` of the trace runs the runner opens."""
_STAGE = "review"
_DISPOSE_GRACE_S = 1.0
"""Extra wait past the deadline, so a route reports its own timeout before we cancel it."""


MAX_TOOL_ROUNDS = 4
"""The most rounds of read-only tool calls a ``reviewer-persona`` review may make."""


class ReviewTools(Protocol):
    """Read-only verification tools for a ``reviewer-persona`` review (read, search).

    The host runs them where the reviewed agent works (the eval's workspace sandbox);
    nothing they do may change it.
    """

    @property
    def specs(self) -> Sequence[Mapping[str, Any]]:
        """The OpenAI tool specs offered to the reviewer."""
        ...

    async def call(self, name: str, arguments: str) -> str:
        """The result text of ``name(arguments)``; a failure is a result text too."""
        ...


class ReviewTrigger(StrEnum):
    """What started a review run (recorded in the trace)."""

    MANUAL = "manual"
    """Someone asked for it: the CLI, the JSON endpoint, a host agent's explicit call."""
    CHECKPOINT = "checkpoint"
    """The automatic turn-stopping checkpoint of a host agent."""
    ENSEMBLE = "ensemble"
    """One view of a context-intervention ensemble."""


class ReviewReason(StrEnum):
    """Why a run ended as it did: the one reason code of a :class:`ReviewOutcome`."""

    ACCEPTED = "accepted"
    """The run completed normally and its answer is a valid packet."""
    REVIEW_TIMEOUT = "review_timeout"
    """The reviewer gave no complete answer before the deadline."""
    REVIEW_FAILED = "review_failed"
    """The reviewer's route failed (connection, HTTP error, bad response) or the store did."""
    REVIEW_ABORTED = "review_aborted"
    """The host aborted the run; any answer is discarded."""
    REVIEW_INCOMPLETE = "review_incomplete"
    """The call returned, but not normally (a finish reason other than ``stop``, none at
    all, or tool calls): cut at the token limit, filtered, or calling tools instead of
    answering; its text is never parsed."""
    REVIEW_MALFORMED = "review_malformed"
    """The answer broke the packet contract; :attr:`ReviewOutcome.rejection` says how."""
    DEADLINE_EXCEEDED = "deadline_exceeded"
    """The deadline had passed before the call could start; nothing was called."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """A call budget or daily limit had no room; nothing was called."""
    REVIEWER_OFFLINE = "reviewer_offline"
    """The reviewer's route is the built-in offline engine, which calls no model: nothing
    was reviewed, so its answer (a notice saying so) is no packet and is never published."""


_ERROR_REASONS: tuple[tuple[type[FoureyesError], ReviewReason], ...] = (
    (RouteTimeout, ReviewReason.REVIEW_TIMEOUT),
    (RouteError, ReviewReason.REVIEW_FAILED),
    (DeadlineExceeded, ReviewReason.DEADLINE_EXCEEDED),
    (BudgetExhausted, ReviewReason.BUDGET_EXHAUSTED),
    (StoreError, ReviewReason.REVIEW_FAILED),
)
"""The review's table from error classes to reason codes; the first matching row wins."""


def reason_for_error(error: FoureyesError) -> ReviewReason:
    """The reason code of a failed review call (the capability's one mapping table).

    Raises:
        UsageError: ``error`` is not a failure a review call can have (a bug, not data).
    """
    for kind, reason in _ERROR_REASONS:
        if isinstance(error, kind):
            return reason
    raise UsageError(f"no review reason for {type(error).__name__}")


@dataclass(frozen=True, slots=True)
class ReviewOutcome:
    """The result of one review run: a packet, or no packet and why. Never both.

    Build it with :meth:`accepted` or :meth:`no_packet`.
    """

    reason: ReviewReason
    """Why the run ended as it did."""
    packet: ReviewPacket | None = None
    """The accepted packet (only when ``reason`` is ``accepted``)."""
    rejection: PacketRejection | None = None
    """The contract rule broken (only when ``reason`` is ``review_malformed``)."""
    published: bool = False
    """Whether the run's publication policy publishes the packet (never without one)."""
    detail: str = field(default="", compare=False)
    """Short detail of a failure (error class, field paths, sizes); no reviewer text."""
    trace_id: str | None = field(default=None, compare=False)
    """The trace run that records it, when a trace writer was configured."""
    route: str | None = field(default=None, compare=False)
    """The route that answered, when a call returned."""
    offline: bool = field(default=False, compare=False)
    """Whether the built-in offline engine answered."""
    usage: Usage | None = field(default=None, compare=False)
    """The tokens the reviewer's call reported, when a call returned."""

    def __post_init__(self) -> None:
        accepted = self.reason is ReviewReason.ACCEPTED
        if accepted != (self.packet is not None):
            raise UsageError("an outcome has a packet exactly when it is accepted")
        if (self.reason is ReviewReason.REVIEW_MALFORMED) != (self.rejection is not None):
            raise UsageError("an outcome names a rejection exactly when it is malformed")
        if self.published and self.packet is None:
            raise UsageError("only an accepted packet can be published")

    @classmethod
    def accepted(cls, packet: ReviewPacket, *, published: bool, **facts: Any) -> ReviewOutcome:
        """An accepted packet (``facts``: ``trace_id``, ``route``, ``offline``, ``usage``)."""
        return cls(reason=ReviewReason.ACCEPTED, packet=packet, published=published, **facts)

    @classmethod
    def no_packet(
        cls,
        reason: ReviewReason,
        *,
        rejection: PacketRejection | None = None,
        detail: str = "",
        **facts: Any,
    ) -> ReviewOutcome:
        """A run that produced no packet, for ``reason``.

        Raises:
            UsageError: ``reason`` is ``accepted``, or ``rejection`` is given exactly when
                ``reason`` is not ``review_malformed``.
        """
        return cls(reason=reason, rejection=rejection, detail=detail, **facts)

    @property
    def ok(self) -> bool:
        """Whether the run produced a packet."""
        return self.packet is not None

    def as_json(self) -> dict[str, Any]:
        """The outcome as plain JSON data (the packet as its wire object)."""
        return {
            "reason": self.reason.value,
            "packet": self.packet.as_json() if self.packet else None,
            "packet_sha256": self.packet.sha256 if self.packet else None,
            "rendered": self.packet.render() if self.packet else None,
            "rejection": self.rejection.value if self.rejection else None,
            "published": self.published,
            "detail": self.detail,
            "trace_id": self.trace_id,
            "route": self.route,
            "offline": self.offline,
        }


class ReviewRunner:
    """Runs one reviewer call at a time per :meth:`run`; one instance serves a process.

    Args:
        caller: the metered model caller (its trace writer, if any, records every run).
        packet_max_chars: ``review.packet_max_chars``.
    """

    def __init__(self, caller: ModelCaller, *, packet_max_chars: int) -> None:
        """Run reviews through ``caller``, accepting packets up to ``packet_max_chars``."""
        if packet_max_chars < 1:
            raise UsageError(f"packet_max_chars must be at least 1, got {packet_max_chars}")
        self.caller = caller
        self.packet_max_chars = packet_max_chars

    @property
    def accepts_images(self) -> bool | None:
        """Whether the reviewer's route accepts images: its ``images`` config (``None``: unknown).

        A review whose projection holds images is skipped, before any call, unless this
        is ``True`` (:func:`~foureyes.review.projection.project`).
        """
        route, _ = self.caller.routes.for_role(Role.REVIEWER)
        return route.images

    @property
    def token_budget(self) -> tuple[int | None, float]:
        """The reviewer route's ``max_request_tokens`` and ``bytes_per_token``.

        A review request estimated over the budget is skipped before any call
        (:func:`~foureyes.review.request.estimate_tokens`).
        """
        route, _ = self.caller.routes.for_role(Role.REVIEWER)
        return route.max_request_tokens, route.bytes_per_token

    async def run(
        self,
        request: ChatRequest,
        *,
        deadline: Deadline,
        budget: CallBudget | None = None,
        abort: asyncio.Event | None = None,
        trigger: ReviewTrigger = ReviewTrigger.MANUAL,
        policy: PublicationPolicy = PublicationPolicy.UPDATES_ONLY,
        conversation_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        tools: ReviewTools | None = None,
    ) -> ReviewOutcome:
        """Run the reviewer on ``request`` and return its outcome (see the module doc).

        Args:
            request: the review request (its role is set to ``reviewer`` if unset).
            deadline: no answer is waited for past it (plus a short grace for the route
                to report its own timeout).
            budget: the calls this run may make; one by default (the review is one-shot).
            abort: set by the host to abort the run; an answer that arrives after (or
                together with) the abort is discarded.
            trigger: what started the run (recorded in the trace).
            policy: which accepted packets are published; the decision is recorded with
                the run, before the outcome is returned (invariant 10).
            conversation_id: the reviewed session's id, for the trace.
            meta: extra JSON facts for the trace run (window, mask, mode, sizes).
            tools: read-only verification tools (``reviewer-persona``): an answer that
                calls only these is answered with their results and the reviewer is
                called again, at most :data:`MAX_TOOL_ROUNDS` times (the default budget
                grows to match); without them any tool call ends the run as incomplete.

        Raises:
            asyncio.CancelledError: the task running this was cancelled; the call is
                disposed of and the run recorded as aborted first.
        """
        trace = self.caller.trace
        trace_id: str | None = None
        if trace is not None:
            try:
                trace_id = await trace.start_run(
                    REVIEW_RUN_KIND,
                    conversation_id=conversation_id,
                    meta={"trigger": trigger.value, "policy": policy.value, **(meta or {})},
                )
            except StoreError as exc:
                # Unrecorded runs are never published (invariant 10): no record, no call.
                return ReviewOutcome.no_packet(ReviewReason.REVIEW_FAILED, detail=str(exc))
        calls = 1 + (MAX_TOOL_ROUNDS if tools is not None else 0)
        scope = CallScope(deadline=deadline, budget=budget or CallBudget(calls), trace_id=trace_id)
        try:
            outcome = await self._attempt(request, scope, abort, policy, tools)
        except asyncio.CancelledError:
            aborted = ReviewOutcome.no_packet(
                ReviewReason.REVIEW_ABORTED, detail="cancelled", trace_id=trace_id
            )
            await self._record(aborted)
            raise
        return await self._record(outcome)

    async def _attempt(
        self,
        request: ChatRequest,
        scope: CallScope,
        abort: asyncio.Event | None,
        policy: PublicationPolicy,
        tools: ReviewTools | None,
    ) -> ReviewOutcome:
        facts: dict[str, Any] = {"trace_id": scope.trace_id}
        usage: Usage | None = None
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            answer = await self._call_once(request, scope, abort, facts)
            if isinstance(answer, ReviewOutcome):
                return answer
            usage = answer.usage if usage is None else usage + answer.usage
            facts["usage"] = usage
            if tools is None or round_ == MAX_TOOL_ROUNDS or not _only_tool_calls(answer, tools):
                return self._judge(answer, facts, policy)
            # Read-only verification: the results go back and the reviewer is asked again.
            results = [
                ChatMessage(
                    role="tool", tool_call_id=c.id, content=await tools.call(c.name, c.arguments)
                )
                for c in answer.tool_calls
            ]
            messages = (*request.messages, answer.as_assistant_message(), *results)
            request = request.model_copy(update={"messages": messages})
        raise AssertionError("unreachable: the last round always judges")  # pragma: no cover

    async def _call_once(
        self,
        request: ChatRequest,
        scope: CallScope,
        abort: asyncio.Event | None,
        facts: dict[str, Any],
    ) -> ReviewOutcome | ChatResult:
        """One reviewer call: its result, or the outcome of a run that ended without one."""
        if abort is not None and abort.is_set():
            return ReviewOutcome.no_packet(ReviewReason.REVIEW_ABORTED, detail="aborted", **facts)
        route_cfg, _ = self.caller.routes.for_role(Role.REVIEWER)
        wait_s = min(scope.deadline.remaining(), route_cfg.timeout_s) + _DISPOSE_GRACE_S
        call = asyncio.ensure_future(self.caller.call(Role.REVIEWER, request, scope, stage=_STAGE))
        aborted = asyncio.ensure_future(abort.wait()) if abort is not None else None
        try:
            await asyncio.wait(
                {call} if aborted is None else {call, aborted},
                timeout=max(wait_s, 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            await _dispose(call, aborted)
        # Lifecycle first: an abort wins over any answer, however valid (invariant 4).
        if abort is not None and abort.is_set():
            return ReviewOutcome.no_packet(ReviewReason.REVIEW_ABORTED, detail="aborted", **facts)
        if call.cancelled():
            return ReviewOutcome.no_packet(
                ReviewReason.REVIEW_TIMEOUT, detail=f"no answer within {wait_s:.3g}s", **facts
            )
        error = call.exception()
        if isinstance(error, FoureyesError):
            return ReviewOutcome.no_packet(
                reason_for_error(error), detail=f"{type(error).__name__}: {error}", **facts
            )
        if error is not None:
            raise error
        return call.result()

    def _judge(
        self, result: ChatResult, facts: dict[str, Any], policy: PublicationPolicy
    ) -> ReviewOutcome:
        facts |= {"route": result.route, "offline": result.offline}
        facts.setdefault("usage", result.usage)
        incomplete = finish_failure(result)
        if incomplete is not None:
            # Text of a call that did not complete normally is never read as a packet,
            # even when it parses: the cut-off rest could have changed it. The reviewer's
            # request may carry the primary's tools (cache alignment), but it must not call them.
            detail = (
                f"{incomplete.value}: finish_reason={result.finish_reason!r}, "
                f"tool_calls={len(result.tool_calls)}"
            )
            return ReviewOutcome.no_packet(ReviewReason.REVIEW_INCOMPLETE, detail=detail, **facts)
        if result.offline:
            # The offline engine cannot judge a session: what it says is a notice, not a
            # review, and publishing it would tell the primary a reviewer looked.
            detail = "the offline engine cannot review; configure a model route for the reviewer"
            return ReviewOutcome.no_packet(ReviewReason.REVIEWER_OFFLINE, detail=detail, **facts)
        check = check_packet(result.text, max_chars=self.packet_max_chars)
        if check.packet is None:
            return ReviewOutcome.no_packet(
                ReviewReason.REVIEW_MALFORMED,
                rejection=check.rejection,
                detail=check.detail,
                **facts,
            )
        published = policy.publishes(check.packet)
        return ReviewOutcome.accepted(check.packet, published=published, **facts)

    async def _record(self, outcome: ReviewOutcome) -> ReviewOutcome:
        trace = self.caller.trace
        if trace is None or outcome.trace_id is None:
            return outcome
        if outcome.packet is not None:
            proposal = {
                "sha256": outcome.packet.sha256,
                "status": outcome.packet.status.value,
                "items": len(outcome.packet.items),
                "kinds": [item.kind.value for item in outcome.packet.items],
                "chars": len(outcome.packet.render()),
            }
            first = TraceEvent(EventKind.PROPOSAL, _STAGE, proposal)
        else:
            failure = {
                "reason": outcome.reason.value,
                "rejection": outcome.rejection.value if outcome.rejection else None,
                "detail": outcome.detail,
            }
            first = TraceEvent(EventKind.ERROR, _STAGE, failure)
        result = "accepted" if outcome.ok else "no_packet"
        decision = {
            "outcome": result,
            "reason": outcome.reason.value,
            "rejection": outcome.rejection.value if outcome.rejection else None,
            "packet_sha256": outcome.packet.sha256 if outcome.packet else None,
            "published": outcome.published,
        }
        try:
            await trace.append(outcome.trace_id, first)
            await trace.append(outcome.trace_id, TraceEvent(EventKind.DECISION, _STAGE, decision))
            await trace.finish_run(outcome.trace_id, outcome=result, reason=outcome.reason.value)
        except StoreError as exc:
            # A packet whose decision is not on record is not handed out (invariant 10).
            return ReviewOutcome.no_packet(
                ReviewReason.REVIEW_FAILED, detail=str(exc), trace_id=outcome.trace_id
            )
        return outcome


def _only_tool_calls(result: ChatResult, tools: ReviewTools) -> bool:
    names = {spec["function"]["name"] for spec in tools.specs}
    return (
        result.finish_reason == "tool_calls"
        and bool(result.tool_calls)
        and all(c.name in names for c in result.tool_calls)
    )


async def _dispose(call: asyncio.Future[ChatResult], aborted: asyncio.Future[Any] | None) -> None:
    """Cancel whatever of the run is still pending and wait until it has stopped."""
    pending = [f for f in (call, aborted) if f is not None and not f.done()]
    for future in pending:
        future.cancel()
    if pending:
        await asyncio.wait(pending)
