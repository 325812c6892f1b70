"""The Python API for host agents: manual masked reviews and the automatic checkpoint.

:class:`Reviewer` composes the review path (project → build the request → run the one
:class:`~foureyes.review.runner.ReviewRunner` → publish by policy) for both triggers:

- :meth:`Reviewer.review` is the manual trigger (the CLI, the JSON endpoint, a host's
  explicit call);
- :meth:`Reviewer.checkpoint` is the automatic turn-stopping checkpoint: the host calls it
  when its agent's turn is about to stop, and publishes the returned message, if any,
  into the primary's context (:func:`~foureyes.review.publication.decide_checkpoint`
  says when it runs).

A projection that does not fit is skipped before any model call, with its metadata only
(docs/design.md 4, invariant 9), and the skip is recorded in the trace like a run; so is
a request estimated over the reviewer route's token budget (``over_tokens``, the estimate
and the budget in the metadata).

The task view (``task_only``, :mod:`~foureyes.review.projection`) has an instruction and
a default ``reviewer-persona`` system prompt of its own, since the per-mask instruction
describes the agent's work and the default persona a reviewer that reads it: the
reviewer is told it sees the task alone (and, with read-only tools, may read the current
state) and asked for its own approach and answer under the one packet contract
(:func:`task_view_instruction`, :data:`TASK_VIEW_PERSONA`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from foureyes.config import ReviewConfig
from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Deadline
from foureyes.core.errors import StoreError
from foureyes.core.locale import Locale
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.llm.prompting import DATA_RULE
from foureyes.review.packet import review_instruction
from foureyes.review.projection import (
    Mask,
    Projection,
    ProjectionMeta,
    ProjectionSkipped,
    SkipReason,
    Window,
    project,
)
from foureyes.review.publication import (
    CheckpointDecision,
    CheckpointLatch,
    CheckpointSkip,
    PublicationPolicy,
    decide_checkpoint,
    publication_message,
    turn_used_tools,
)
from foureyes.review.request import (
    RequestMode,
    ReviewRequest,
    build_review_request,
    estimate_tokens,
)
from foureyes.review.runner import (
    REVIEW_RUN_KIND,
    ReviewOutcome,
    ReviewReason,
    ReviewRunner,
    ReviewTools,
    ReviewTrigger,
)
from foureyes.review.session import Session, UserMessage

__all__ = [
    "CheckpointResult",
    "Reviewer",
    "SessionReview",
    "TASK_VIEW_PERSONA",
    "TASK_VIEW_PERSONA_WITH_TOOLS",
    "project_session",
    "projection_json",
    "task_view_instruction",
]

TASK_VIEW_PERSONA = (
    "You are an independent second solver of a task another AI agent is working on. You "
    "are shown the task as its user stated it, not the agent's work. You take no actions "
    "and call no tools; you work out your own approach and answer, to be compared with the "
    "agent's, and you state only what you can support."
)
"""The ``reviewer-persona`` system prompt of a task view when none is given."""

TASK_VIEW_PERSONA_WITH_TOOLS = (
    "You are an independent second solver of a task another AI agent is working on. You "
    "are shown the task as its user stated it, not the agent's work. You take no actions; "
    "the tools offered only read, and you may call them to look at the current state "
    "before you answer. You work out your own approach and answer, to be compared with "
    "the agent's, and you state only what you can support."
)
"""The default task-view system prompt when read-only tools are offered."""


def task_view_instruction(*, max_chars: int, tools: bool = False) -> str:
    """The last user message of a task-view review: what the reviewer sees, then the contract.

    It says only what is true of the task view (the task alone; the current state through
    read-only tools when ``tools``), asks for the reviewer's own approach and answer, and
    carries :data:`~foureyes.llm.prompting.DATA_RULE` and the packet contract of
    :func:`~foureyes.review.packet.review_instruction`, word for word.
    """
    masked = review_instruction(max_chars=max_chars, mask=Mask.ACTION_ONLY)
    _, rule, contract = masked.partition(f"{DATA_RULE}\n\n")
    assert rule, "the review instruction carries the data rule before its contract"
    state = (
        " The tools offered only read: call them to look at the current state first."
        if tools
        else ""
    )
    return (
        "You are not the agent working on this task, and none of its work is shown to you: "
        f"you see only the task as its user stated it.{state} Work out independently how "
        "you would approach the task and what you would answer, so that your answer can be "
        'compared with the agent\'s: give your answer as a "conclusion", the steps of your '
        'approach as "suggestion" items, and what the task leaves open as "unknown". Do not '
        f"guess what the agent did or why. {DATA_RULE}\n\n{contract}"
    )


def project_session(
    session: Session,
    window: Window,
    mask: Mask,
    config: ReviewConfig,
    *,
    images: bool | None = None,
    task_only: bool = False,
) -> Projection | ProjectionSkipped:
    """Project ``session`` within the size limits of ``config`` (see :func:`project`).

    ``images`` says whether the reviewer's route accepts images (``None``: unknown, so a
    projection holding images is skipped); ``task_only`` asks for the task view.
    """
    return project(
        session,
        window,
        mask,
        max_snapshot_chars=config.max_snapshot_chars,
        max_images=config.max_images,
        images=images,
        mutating_tools=config.mutating_tools,
        task_only=task_only,
    )


def projection_json(projection: Projection | ProjectionSkipped) -> dict[str, Any]:
    """A projection as JSON data: skip reason, metadata and, unless skipped, the messages.

    This is what ``--project-only`` prints: the wire form of the native prefix and of the
    snapshot, exactly as a review request would carry them.
    """
    if isinstance(projection, ProjectionSkipped):
        return {"skipped": projection.reason.value, "projection": projection.meta.to_dict()}
    return {
        "skipped": None,
        "projection": projection.meta.to_dict(),
        "prefix": [message.to_wire() for message in projection.prefix],
        "snapshot": projection.snapshot.to_wire(),
    }


@dataclass(frozen=True, slots=True)
class SessionReview:
    """One review of one session: what was projected and sent, what came back, what goes out.

    Exactly one of ``skipped`` and ``outcome`` is set.
    """

    meta: ProjectionMeta
    """Facts about the projection (window, mask, counts, sizes); never session text."""
    skipped: ProjectionSkipped | None
    """Why nothing was sent, when the projection was skipped (no model was called)."""
    request: ReviewRequest | None
    """The request sent, with its prefix share; ``None`` when skipped."""
    outcome: ReviewOutcome | None
    """The run's outcome; ``None`` when skipped."""
    publication: UserMessage | None
    """The plugin message to give the primary agent; ``None`` when nothing is published."""
    trace_id: str | None = None
    """The trace run that records the review (or its skip)."""

    @property
    def accepted(self) -> bool:
        """Whether the review produced an accepted packet."""
        return self.outcome is not None and self.outcome.ok

    def as_json(self) -> dict[str, Any]:
        """The review as plain JSON data (no request text, no session text)."""
        return {
            "accepted": self.accepted,
            "skipped": self.skipped.reason.value if self.skipped else None,
            "projection": self.meta.to_dict(),
            "request": None
            if self.request is None
            else {
                "mode": self.request.mode.value,
                "messages": len(self.request.request.messages),
                "prefix_share": self.request.prefix_share,
                "prefix_bytes": self.request.prefix_bytes,
                "total_bytes": self.request.total_bytes,
            },
            "outcome": self.outcome.as_json() if self.outcome else None,
            "publication": None
            if self.publication is None
            else {"source": self.publication.source.value, "content": self.publication.content},
            "trace_id": self.trace_id,
        }


@dataclass(frozen=True, slots=True)
class CheckpointResult:
    """What the automatic checkpoint did at one turn stop."""

    turn_id: str | None
    """The turn it considered; ``None`` for an empty session."""
    decision: CheckpointDecision
    """Whether it ran, and if not, why."""
    review: SessionReview | None
    """The review, when it ran."""

    @property
    def publication(self) -> UserMessage | None:
        """The message to give the primary agent, if any."""
        return self.review.publication if self.review else None


class Reviewer:
    """Masked reviews of agent sessions for a host, through one :class:`ReviewRunner`.

    Args:
        runner: the one runner (its caller's trace writer records every review).
        config: the ``[review]`` settings (size limits of projections and packets).
        policy: which accepted packets are published; ``updates-only`` by default.
        latch: the checkpoint's per-(session, turn) memory; a fresh one by default.
        locale: the language of publication headers.

    Whether a projection may hold images is the reviewer route's ``images`` setting
    (:attr:`ReviewRunner.accepts_images`).
    """

    def __init__(
        self,
        runner: ReviewRunner,
        config: ReviewConfig,
        *,
        policy: PublicationPolicy = PublicationPolicy.UPDATES_ONLY,
        latch: CheckpointLatch | None = None,
        locale: Locale = Locale.EN,
    ) -> None:
        """Review through ``runner`` under ``config`` and ``policy``."""
        self.runner = runner
        self.config = config
        self.policy = policy
        self.latch = latch if latch is not None else CheckpointLatch()
        self.locale = locale

    async def review(
        self,
        session: Session,
        *,
        window: Window,
        mask: Mask,
        mode: RequestMode = RequestMode.CACHE_ALIGNED,
        session_id: str | None = None,
        deadline: Deadline | None = None,
        budget: CallBudget | None = None,
        abort: asyncio.Event | None = None,
        trigger: ReviewTrigger = ReviewTrigger.MANUAL,
        policy: PublicationPolicy | None = None,
        primary_system: str | None = None,
        primary_tools: Sequence[Mapping[str, Any]] = (),
        persona_system: str | None = None,
        tools: ReviewTools | None = None,
        task_only: bool = False,
    ) -> SessionReview:
        """Review ``session`` through ``window`` and ``mask``, one reviewer call at most.

        Args:
            session: the session (only read).
            window: which part is reviewed.
            mask: what the reviewer does not see.
            mode: ``cache-aligned`` or ``reviewer-persona`` request.
            session_id: the host's id of the session (trace, checkpoint latch).
            deadline: the run's deadline; by default only the route's timeout bounds it.
            budget: the calls the run may make; one by default.
            abort: set by the host to abort the run.
            trigger: what started it; a manual masked review is noted in the latch, so
                the checkpoint skips that turn.
            policy: overrides the reviewer's publication policy for this review.
            primary_system: the primary's system prompt (default: the session's).
            primary_tools: the primary's tools (default: the session's).
            persona_system: the reviewer's own system prompt (``reviewer-persona``).
            tools: read-only verification tools (``reviewer-persona`` only): offered to the
                reviewer and run by the runner when it calls them. A ``cache-aligned``
                request carries the primary's tools, which the reviewer must never call,
                so none are run there.
            task_only: the task view (``window`` must be ``all-turns``): the reviewer sees
                the user's messages only and is asked for its own approach and answer
                (:func:`task_view_instruction`; by default :data:`TASK_VIEW_PERSONA` in
                ``reviewer-persona`` mode). It reviews no step, so it is not noted in the
                checkpoint latch.

        Raises:
            ValueError: ``task_only`` with a window other than ``all-turns``.
        """
        policy = policy or self.policy
        if mode is not RequestMode.REVIEWER_PERSONA:
            tools = None
        projection = project_session(
            session,
            window,
            mask,
            self.config,
            images=self.runner.accepts_images,
            task_only=task_only,
        )
        if isinstance(projection, ProjectionSkipped):
            trace_id = await self._record_skip(projection, trigger, session_id)
            return SessionReview(projection.meta, projection, None, None, None, trace_id)
        masked = mask is not Mask.NONE and not task_only
        if trigger is ReviewTrigger.MANUAL and masked and session_id:
            self.latch.note_manual(session_id, session.turn_at(len(session.events) - 1).turn_id)
        max_chars = self.runner.packet_max_chars
        if task_only:
            instruction = task_view_instruction(max_chars=max_chars, tools=tools is not None)
            if persona_system is None:
                persona_system = (
                    TASK_VIEW_PERSONA if tools is None else TASK_VIEW_PERSONA_WITH_TOOLS
                )
        else:
            instruction = review_instruction(max_chars=max_chars, mask=mask)
        request = build_review_request(
            session,
            projection,
            mode,
            instruction=instruction,
            primary_system=primary_system,
            primary_tools=primary_tools,
            persona_system=persona_system,
            persona_tools=tools.specs if tools is not None else (),
        )
        budget_tokens, bytes_per_token = self.runner.token_budget
        tokens = estimate_tokens(request, bytes_per_token)
        meta = replace(projection.meta, request_tokens=tokens, token_budget=budget_tokens)
        if budget_tokens is not None and tokens > budget_tokens:
            # Invariant 9: a request over the route's budget is skipped whole, never cut.
            skipped = ProjectionSkipped(SkipReason.OVER_TOKENS, meta)
            trace_id = await self._record_skip(skipped, trigger, session_id)
            return SessionReview(meta, skipped, None, None, None, trace_id)
        projection = replace(projection, meta=meta)
        outcome = await self.runner.run(
            request.request,
            deadline=deadline or Deadline.never(),
            budget=budget,
            abort=abort,
            trigger=trigger,
            policy=policy,
            conversation_id=session_id,
            meta=_run_meta(projection.meta, request),
            tools=tools,
        )
        # The runner recorded the same policy's decision (``outcome.published``) first.
        message = publication_message(outcome.packet, policy, locale=self.locale)
        return SessionReview(projection.meta, None, request, outcome, message, outcome.trace_id)

    async def checkpoint(
        self,
        session: Session,
        *,
        session_id: str,
        window: Window | None = None,
        mask: Mask = Mask.REASONING_ONLY,
        mode: RequestMode = RequestMode.CACHE_ALIGNED,
        budget: CallBudget | None = None,
        deadline: Deadline | None = None,
        abort: asyncio.Event | None = None,
        tools: ReviewTools | None = None,
    ) -> CheckpointResult:
        """The automatic checkpoint at a stop of the session's last turn.

        The turn considered is the one the last event belongs to. The review runs when
        :func:`~foureyes.review.publication.decide_checkpoint` says so; the latch is taken
        before it starts and given back only when the run was stopped by a budget before
        any model call (a skip for budget does not latch).

        Args:
            session: the session as it stands at the stop.
            session_id: the host's id of the session.
            window: default ``current-turn``.
            mask: default ``reasoning-only``.
            mode: the request mode.
            budget: the calls left for automatic reviews; none left is a ``no_budget`` skip.
            deadline: the run's deadline.
            abort: set by the host to abort the run.
            tools: read-only verification tools (``reviewer-persona``; see :meth:`review`).
        """
        if not session.events:
            return CheckpointResult(None, CheckpointDecision(CheckpointSkip.NO_TOOLS), None)
        turn = session.turn_at(len(session.events) - 1)
        decision = decide_checkpoint(
            used_tools=turn_used_tools(session, turn),
            manual_review_ran=self.latch.manual_ran(session_id, turn.turn_id),
            attempted=self.latch.attempted(session_id, turn.turn_id),
            budget_left=budget is None or budget.remaining > 0,
        )
        if not decision.run:
            return CheckpointResult(turn.turn_id, decision, None)
        # Latched before the first await, so a second stop of this turn cannot start a
        # second review while this one runs.
        self.latch.latch(session_id, turn.turn_id)
        review = await self.review(
            session,
            window=window or Window.current_turn(),
            mask=mask,
            mode=mode,
            session_id=session_id,
            deadline=deadline,
            budget=budget,
            abort=abort,
            trigger=ReviewTrigger.CHECKPOINT,
            tools=tools,
        )
        if review.outcome is not None and review.outcome.reason is ReviewReason.BUDGET_EXHAUSTED:
            self.latch.release(session_id, turn.turn_id)
        return CheckpointResult(turn.turn_id, decision, review)

    async def _record_skip(
        self, skipped: ProjectionSkipped, trigger: ReviewTrigger, session_id: str | None
    ) -> str | None:
        trace = self.runner.caller.trace
        if trace is None:
            return None
        meta = {"trigger": trigger.value, "projection": skipped.meta.to_dict()}
        try:
            trace_id = await trace.start_run(REVIEW_RUN_KIND, conversation_id=session_id, meta=meta)
            decision = {"outcome": "skipped", "reason": skipped.reason.value}
            await trace.append(trace_id, TraceEvent(EventKind.DECISION, "projection", decision))
            await trace.finish_run(trace_id, outcome="skipped", reason=skipped.reason.value)
        except StoreError:
            # Nothing is sent or published for a skip, so an unrecorded skip exposes
            # nothing; the skip itself is still returned to the caller.
            return None
        return trace_id


def _run_meta(meta: ProjectionMeta, request: ReviewRequest) -> dict[str, Any]:
    return {
        "projection": meta.to_dict(),
        "mode": request.mode.value,
        "prefix_share": request.prefix_share,
        "total_bytes": request.total_bytes,
    }
