"""A minimal Primary agent loop to evaluate review with: a model, four tools, a session.

:class:`AgentLoop` drives the route of the ``primary`` role through the one model-calling
layer (:class:`~foureyes.llm.calls.ModelCaller`: the route's timeout, the run's deadline
and call budget, the spend ledger and the trace) with the tools of a
:class:`~foureyes.evals.workspace.Workspace` (read, search, edit, run). Each model call
is one step; the calls of one answer are executed in order inside that step and their
results recorded before the next call.

It records a native session (:class:`~foureyes.review.session.Session`) as it goes, and
every request is rendered *from* that session (its system message, then
:func:`~foureyes.review.projection.native_messages`), so the session is exactly what the
Primary was sent and the masked-review runner can project it.

After every step the arm's publication hook (if any) is asked, with the session so far,
whether to show the Primary a review packet. A packet it returns is published as the
plugin-origin message of :func:`~foureyes.review.publication.publication_message`, never
as an assistant tool call the Primary did not make, and the loop goes on, even when the
Primary had just answered without a tool call. The loop stops at its turn end (an answer
with no tool call and no packet to show), at its step budget, at an answer that did not
finish normally, or when the model call failed; the :class:`AgentResult` says which.

Given a :class:`~foureyes.review.reviewer.Reviewer`, the Primary also has the
``deliberate`` tool (:mod:`foureyes.review.deliberate`): its calls are dispatched with the
workspace's, on the session as it stands (the calling step still in flight, so neither the
pending call nor its step is reviewed), and the result text is the call's tool result.
:func:`review_checkpoint` is the opt-in automatic path: a publication hook that, when the
Primary answers without a tool call, runs the reviewer's turn-stopping checkpoint
(:meth:`~foureyes.review.reviewer.Reviewer.checkpoint`: at most once per turn, skipped
after a masked ``deliberate`` in the turn) and shows the packet its policy publishes.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from foureyes.core.budget import CallBudget, cost_usd
from foureyes.core.deadline import Deadline
from foureyes.core.errors import (
    BudgetExhausted,
    DeadlineExceeded,
    LimitExceeded,
    RouteError,
    RouteTimeout,
    UsageError,
)
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.evals.workspace import TOOL_SPECS, Workspace
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult, Usage
from foureyes.llm.structured import finish_failure
from foureyes.review.deliberate import DELIBERATE_TOOL, deliberate_tool, run_deliberate
from foureyes.review.packet import ReviewPacket
from foureyes.review.projection import Mask, Window, native_messages
from foureyes.review.publication import PublicationPolicy, publication_message
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer
from foureyes.review.session import (
    AssistantBlock,
    AssistantMessage,
    EndReason,
    ReasoningBlock,
    Session,
    StepEnd,
    StepStart,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

__all__ = [
    "AGENT_SYSTEM",
    "AgentLoop",
    "AgentResult",
    "Checkpoint",
    "Fork",
    "PublicationHook",
    "StopReason",
    "review_checkpoint",
]

AGENT_SYSTEM = (
    "You are a software engineer working in a small repository, the current folder. "
    "Use the tools to read, search and edit its files and to run commands (python is on "
    "the PATH). Paths are relative to the repository. When the task is done, answer with "
    "a short summary of what you changed and call no tool."
)
"""The Primary's default system message."""

_TURN = "t1"
_STAGE = "primary"


class StopReason(StrEnum):
    """Why the loop stopped."""

    COMPLETED = "completed"
    """The Primary answered without a tool call and no packet was shown: its turn end."""
    STEP_BUDGET = "step_budget"
    """It took its budget of steps (model calls) without ending its turn."""
    INCOMPLETE = "incomplete"
    """An answer did not finish normally (cut at the token limit, filtered, no finish
    reason): the turn ends there, and none of its tool calls runs."""
    MODEL_FAILED = "model_failed"
    """The model call failed; :attr:`AgentResult.failure` says how."""


_FAILURES: tuple[tuple[type[Exception], str], ...] = (
    (RouteTimeout, "route_timeout"),
    (RouteError, "route_failed"),
    (DeadlineExceeded, "deadline_exceeded"),
    (BudgetExhausted, "budget_exhausted"),
)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What the publication hook is shown after a step."""

    session: Session
    """The session so far (the step just ended; the turn is still open)."""
    steps: int
    """Steps taken so far."""
    stopping: bool
    """Whether the Primary just answered without a tool call: without a packet now, the
    loop stops."""
    session_id: str = ""
    """The run's session id (fresh per run): the key of the reviewer's checkpoint latch."""


PublicationHook = Callable[[Checkpoint], Awaitable[ReviewPacket | None]]
"""The arm's publication policy: a packet to show the Primary now, or ``None``."""


def review_checkpoint(
    reviewer: Reviewer,
    *,
    window: Window | None = None,
    mask: Mask = Mask.REASONING_ONLY,
    mode: RequestMode = RequestMode.CACHE_ALIGNED,
) -> PublicationHook:
    """The automatic turn-stopping checkpoint as a publication hook.

    At a stopping point (the Primary answered without a tool call) it runs
    :meth:`Reviewer.checkpoint <foureyes.review.reviewer.Reviewer.checkpoint>` on the
    session (``window`` default ``current-turn``); the packet it returns is the one the
    reviewer's policy publishes, so ``updates-only`` shows no ``no_update`` and
    ``observe-only`` shows nothing (the run is still recorded). The loop shows it as a
    plugin-origin message, never as an assistant tool call.
    """

    async def hook(point: Checkpoint) -> ReviewPacket | None:
        if not point.stopping:
            return None
        result = await reviewer.checkpoint(
            point.session, session_id=point.session_id, window=window, mask=mask, mode=mode
        )
        review = result.review
        if review is None or review.publication is None or review.outcome is None:
            return None
        return review.outcome.packet

    return hook


@dataclass(frozen=True, slots=True)
class AgentResult:
    """How one run of the loop went."""

    stop: StopReason
    """Why it stopped."""
    steps: int
    """Steps taken (model calls started)."""
    usage: Usage
    """Tokens of every completed model call, summed (a detail some call did not report,
    reasoning or cache-read tokens, is unknown)."""
    cost_usd: float
    """Their cost at the route's prices."""
    session: Session
    """The native session it recorded, its turn ended."""
    answer: str
    """The visible text of the Primary's last answer."""
    published: tuple[str, ...] = ()
    """The sha256 of every packet shown to the Primary, in order: published by the hook
    or returned by a ``deliberate`` call."""
    failure: str | None = None
    """With :attr:`StopReason.MODEL_FAILED`: ``route_timeout``, ``route_failed``,
    ``deadline_exceeded`` or ``budget_exhausted``; with :attr:`StopReason.INCOMPLETE`: the
    :class:`~foureyes.llm.structured.ParseFailure` of the one finish rule (``truncated``,
    ``content_filtered``, ``unfinished``)."""


@dataclass(frozen=True, slots=True)
class Fork:
    """A run's turn stop, to go on from (:meth:`AgentLoop.resume`) as often as needed."""

    session: Session
    """The session at the stop: the stopping step ended, the turn still open."""
    steps: int
    """Steps taken up to it."""
    usage: Usage | None
    """Their tokens (``None``: no call completed)."""
    answer: str
    """The Primary's answer at the stop."""

    @classmethod
    def at(cls, point: Checkpoint, result: AgentResult) -> Fork:
        """The fork at ``point``, the stop at which ``result``'s run ended."""
        return cls(point.session, point.steps, result.usage, result.answer)


class AgentLoop:
    """The Primary: one model, the workspace's tools, a step budget."""

    def __init__(
        self,
        caller: ModelCaller,
        workspace: Workspace,
        *,
        max_steps: int = 30,
        deadline_s: float = 600.0,
        system: str = AGENT_SYSTEM,
        publish: PublicationHook | None = None,
        reviewer: Reviewer | None = None,
        locale: Locale = Locale.EN,
        trace_id: str | None = None,
        seed: int | None = None,
    ) -> None:
        """Prepare a loop; nothing runs until :meth:`run`.

        Args:
            caller: calls the ``primary`` role's route.
            workspace: the folder the tools work in.
            max_steps: most model calls of a run.
            deadline_s: no model call starts after this many seconds.
            system: the Primary's system message.
            publish: the arm's publication hook; ``None`` never shows a packet.
            reviewer: gives the Primary the ``deliberate`` tool, served by this reviewer;
                ``None``: the workspace's four tools only.
            locale: the language of a published packet's header.
            trace_id: the trace run to record model calls in (``None``: none).
            seed: sent with every request as OpenAI's ``seed`` (``None``: not sent).

        Raises:
            UsageError: ``max_steps`` or ``deadline_s`` is not positive.
        """
        if max_steps < 1 or not deadline_s > 0:
            raise UsageError("an agent loop needs a positive step budget and deadline")
        self._caller = caller
        self._workspace = workspace
        self._max_steps = max_steps
        self._deadline_s = deadline_s
        self._system = system
        self._publish = publish
        self._reviewer = reviewer
        self._locale = locale
        self._trace_id = trace_id
        self._seed = seed

    async def run(self, task: str) -> AgentResult:
        """Give the Primary ``task`` and run until it stops.

        Raises:
            StoreError: the spend ledger or the trace failed.
            CassetteMiss: a replayed request is not in the cassette.
        """
        tools = TOOL_SPECS if self._reviewer is None else (*TOOL_SPECS, deliberate_tool())
        run = _Run(
            Session(
                events=(TurnStart(turn_id=_TURN), UserMessage(content=task)),
                system=(self._system,),
                tools=tools,
            ),
            session_id=uuid.uuid4().hex,
        )
        return await self._go(run, self._scope(self._max_steps))

    async def resume(self, fork: Fork) -> AgentResult:
        """Go on from ``fork``, a run's turn stop, as if the Primary had just stopped there.

        The publication hook is asked first, at that stop (``stopping``); without a packet
        the run ends there (``completed``), with one the Primary goes on, within what is
        left of the step budget. Usage and cost count the fork's steps too, so a resumed
        run costs what the whole run did. Every resume of one fork starts from the same
        session: that is what makes arms forks rather than fresh samples.

        Raises:
            StoreError: the spend ledger or the trace failed.
            CassetteMiss: a replayed request is not in the cassette.
        """
        run = _Run(
            fork.session,
            session_id=uuid.uuid4().hex,
            steps=fork.steps,
            usage=fork.usage,
            answer=fork.answer,
        )
        stop = await self._offer(run, stopping=True)
        if stop is not None:
            return self._end(run, *stop)
        return await self._go(run, self._scope(max(1, self._max_steps - fork.steps)))

    def _scope(self, calls: int) -> CallScope:
        return CallScope(
            deadline=Deadline.after(self._deadline_s),
            budget=CallBudget(calls),
            trace_id=self._trace_id,
        )

    async def _go(self, run: _Run, scope: CallScope) -> AgentResult:
        while run.steps < self._max_steps:
            stop = await self._step(run, scope)
            if stop is not None:
                return self._end(run, *stop)
        return self._end(run, StopReason.STEP_BUDGET)

    async def _step(self, run: _Run, scope: CallScope) -> tuple[StopReason, str | None] | None:
        """One model call and its tool calls; a reason to stop, or ``None`` to go on."""
        run.steps += 1
        step_id = f"s{run.steps}"
        run.session = run.session.append(StepStart(step_id=step_id, turn_id=_TURN))
        messages = (
            *(ChatMessage.system(s) for s in run.session.system),
            *native_messages(run.session),
        )
        request = ChatRequest(
            messages=messages, role=Role.PRIMARY, tools=run.session.tools, seed=self._seed
        )
        try:
            result = await self._caller.call(Role.PRIMARY, request, scope, stage=_STAGE)
        except (RouteError, LimitExceeded) as exc:
            run.session = run.session.append(StepEnd(step_id=step_id))
            return StopReason.MODEL_FAILED, next(c for k, c in _FAILURES if isinstance(exc, k))
        run.usage = result.usage if run.usage is None else run.usage + result.usage
        run.answer = result.text
        unfinished = finish_failure(result, tools_asked=True)
        blocks = _blocks(result, run.steps)
        if unfinished is not None:
            # The one finish rule: an answer that did not finish normally is not acted on.
            # Its tool calls (their arguments may be cut) never run; what it said is kept.
            kept = tuple(b for b in blocks if not isinstance(b, ToolCallBlock))
            if kept:
                run.session = run.session.append(AssistantMessage(blocks=kept))
            run.session = run.session.append(StepEnd(step_id=step_id))
            return StopReason.INCOMPLETE, unfinished.value
        run.session = run.session.append(AssistantMessage(blocks=blocks))
        calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
        for call in calls:
            result_event = await self._tool(run, call)
            run.session = run.session.append(result_event)
        run.session = run.session.append(StepEnd(step_id=step_id))
        return await self._offer(run, stopping=not calls)

    async def _offer(self, run: _Run, *, stopping: bool) -> tuple[StopReason, str | None] | None:
        """Ask the publication hook after a step: show its packet and go on, or stop."""
        if self._publish is not None:
            point = Checkpoint(run.session, run.steps, stopping, run.session_id)
            packet = await self._publish(point)
            if packet is not None:
                message = publication_message(packet, PublicationPolicy.ALL, locale=self._locale)
                assert message is not None  # ALL publishes every packet
                run.session = run.session.append(message)
                run.published.append(packet.sha256)
                return None
        return (StopReason.COMPLETED, None) if stopping else None

    async def _tool(self, run: _Run, call: ToolCallBlock) -> ToolResult:
        """One tool call: ``deliberate`` through the reviewer, the rest in the workspace."""
        if call.name == DELIBERATE_TOOL and self._reviewer is not None:
            # The calling step is in flight: the review sees the steps before it only.
            answer = await run_deliberate(
                self._reviewer, run.session, call.arguments, session_id=run.session_id
            )
            if answer.packet is not None:
                run.published.append(answer.packet.sha256)
            return ToolResult(call_id=call.call_id, content=answer.text, error=answer.error)
        outcome = await self._workspace.call(call.name, call.arguments)
        return ToolResult(call_id=call.call_id, content=outcome.content, error=outcome.error)

    def _end(self, run: _Run, stop: StopReason, failure: str | None = None) -> AgentResult:
        route, _ = self._caller.routes.for_role(Role.PRIMARY)
        session = run.session.append(TurnEnd(turn_id=_TURN, reason=_END_REASONS[stop]))
        usage = run.usage or Usage()
        return AgentResult(
            stop=stop,
            steps=run.steps,
            usage=usage,
            cost_usd=cost_usd(
                usage.prompt_tokens,
                usage.completion_tokens,
                price_in=route.price_in or 0.0,
                price_out=route.price_out or 0.0,
            ),
            session=session,
            answer=run.answer,
            published=tuple(run.published),
            failure=failure,
        )


@dataclass(slots=True)
class _Run:
    """The state of one run while it goes."""

    session: Session
    session_id: str
    steps: int = 0
    usage: Usage | None = None
    """Summed over the completed calls; ``None`` before the first."""
    answer: str = ""
    published: list[str] = field(default_factory=list)


def _blocks(result: ChatResult, step: int) -> tuple[AssistantBlock, ...]:
    blocks: list[AssistantBlock] = []
    if result.reasoning_content:
        blocks.append(ReasoningBlock(text=result.reasoning_content))
    if result.text:
        blocks.append(TextBlock(text=result.text))
    for n, call in enumerate(result.tool_calls, 1):
        # An endpoint that sends no id still gets a result joined to its call.
        call_id = call.id or f"call_{step}_{n}"
        blocks.append(ToolCallBlock(call_id=call_id, name=call.name, arguments=call.arguments))
    return tuple(blocks)


_END_REASONS = {
    StopReason.COMPLETED: EndReason.COMPLETED,
    StopReason.STEP_BUDGET: EndReason.ABORTED,
    StopReason.INCOMPLETE: EndReason.MAX_TOKENS,
    StopReason.MODEL_FAILED: EndReason.ERROR,
}
