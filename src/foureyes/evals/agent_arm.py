"""What an agent-suite arm does with one case: the Primary works the task, the verifier decides.

Each pair gets a fresh temporary copy of the task's repository; the Primary (the
``primary`` role's route under the arm's config) runs the agent loop in it, then the
task's hidden verifier runs in the same copy, before the copy is removed. The prediction
is ``done`` when the verifier passed and ``not_done`` otherwise (the case expects
``done``). A Primary whose model call failed is a failure with that reason
(``route_failed``, ...), as is a verifier that timed out or could not start; a Primary
that used up its step budget is not a failure: the verifier still judges what it left.

An arm without a ``mask`` (the baseline) runs the Primary alone. A reviewing arm reviews
at the Primary's turn stop, through :meth:`~foureyes.review.Reviewer.checkpoint` (the one
reviewer runner, at most once per turn) with the arm's window and mask; an accepted
``update`` packet is shown to the Primary, which goes on, unless the arm is
``observe_only``: then nothing is shown and the pair records what would have been. The
review's own failures (timeout, malformed packet, a skipped projection) are facts of the
pair, not its failure: the Primary goes on without a packet and the verifier decides.

What the metrics read (:mod:`foureyes.evals.metrics`), in the pair's detail: whether a
packet was shown (``shown``) or would have been (``would_show``); whether the Primary
acted on it (``adopted``: the workspace's files differ between the moment the packet was
shown and the end of the run); the packet's items and how many of them restate what the
Primary had already said (``restated``, by :func:`foureyes.core.overlap.matches` against
each sentence of its text and reasoning); the tokens of every call (the Primary's and the
reviewer's); whether a call timed out, whether the packet broke its format; and the
sha256 of the arm's review instruction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foureyes.config import Config
from foureyes.core.budget import cost_usd
from foureyes.core.digest import sha256_hex
from foureyes.core.overlap import matches
from foureyes.core.roles import Role
from foureyes.evals.agent import AgentLoop, Checkpoint
from foureyes.evals.agent_tasks import agent_task, task_workspace
from foureyes.evals.arms import CaseAnswer
from foureyes.evals.suite import Arm, Case, Suite, tree_sha256
from foureyes.evals.verify import VerifierResult
from foureyes.evals.workspace import ReadOnlyTools, Workspace
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import Provider, Usage
from foureyes.llm.routes import Routes
from foureyes.review.packet import PacketStatus, ReviewPacket, review_instruction
from foureyes.review.projection import Mask, Window
from foureyes.review.publication import PublicationPolicy
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, SessionReview
from foureyes.review.runner import ReviewReason, ReviewRunner
from foureyes.review.session import AssistantMessage, ReasoningBlock, Session, TextBlock
from foureyes.store import Store

__all__ = [
    "AGENT_MAX_STEPS",
    "DONE",
    "NOT_DONE",
    "answer_agent_case",
    "instruction_sha256",
    "restated_items",
]

DONE = "done"
"""The prediction of a pair whose verifier passed."""
NOT_DONE = "not_done"
"""The prediction of a pair whose verifier rejected the workspace."""
AGENT_MAX_STEPS = 30
"""The Primary's step budget per case."""

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|[\n。！？]+")


def instruction_sha256(mask: Mask, config: Config) -> str:
    """The sha256 of the review instruction an arm with ``mask`` sends under ``config``."""
    text = review_instruction(max_chars=config.review.packet_max_chars, mask=mask)
    return sha256_hex(text.encode("utf-8"))


def restated_items(packet: ReviewPacket, session: Session) -> int:
    """How many of ``packet``'s items restate what the Primary said in ``session``.

    ``session`` is the session as it was reviewed (what the Primary said before the
    packet). An item restates when it :func:`~foureyes.core.overlap.matches` one sentence of the
    Primary's visible text or reasoning (each split at sentence ends and line breaks).
    """
    said = [
        sentence
        for event in session.events
        if isinstance(event, AssistantMessage)
        for block in event.blocks
        if isinstance(block, TextBlock | ReasoningBlock)
        for sentence in _SENTENCE.split(block.text)
        if sentence.strip()
    ]
    return sum(1 for item in packet.items if any(matches(item.content, s) for s in said))


@dataclass(slots=True)
class _ArmReview:
    """The arm's publication hook: one checkpoint review per turn stop, shown by policy."""

    reviewer: Reviewer
    window: Window
    mask: Mask
    session_id: str
    folder: Path
    observe_only: bool
    mode: RequestMode
    review: SessionReview | None = None
    reviewed: Session | None = None
    shown_sha256: str | None = None

    async def hook(self, point: Checkpoint) -> ReviewPacket | None:
        if not point.stopping:
            return None
        done = await self.reviewer.checkpoint(
            point.session,
            session_id=self.session_id,
            window=self.window,
            mask=self.mask,
            mode=self.mode,
            tools=ReadOnlyTools(Workspace(self.folder)),
        )
        if done.review is None:
            return None  # this turn was reviewed already
        self.review, self.reviewed = done.review, point.session
        outcome = done.review.outcome
        if self.observe_only or outcome is None or not outcome.published:
            return None
        self.shown_sha256 = tree_sha256(self.folder)
        return outcome.packet

    def facts(self, config: Config, end_sha256: str) -> dict[str, Any]:
        review, said = self.review, self.reviewed
        outcome = review.outcome if review is not None else None
        packet = outcome.packet if outcome is not None else None
        reason = None
        if review is not None and review.skipped is not None:
            reason = f"skipped:{review.skipped.reason.value}"
        elif outcome is not None:
            reason = outcome.reason.value
        update = packet is not None and packet.status is PacketStatus.UPDATE
        shown = self.shown_sha256 is not None
        return {
            "reviewed": review is not None,
            "review_reason": reason,
            "packet_status": packet.status.value if packet is not None else None,
            "shown": shown,
            "observe_only": self.observe_only,
            "would_show": self.observe_only and update,
            "adopted": (end_sha256 != self.shown_sha256) if shown else None,
            "items": len(packet.items) if packet is not None else 0,
            "restated": restated_items(packet, said) if packet and said else 0,
            "review_timeout": reason == ReviewReason.REVIEW_TIMEOUT.value,
            "format_failure": reason == ReviewReason.REVIEW_MALFORMED.value,
            "instruction_sha256": instruction_sha256(self.mask, config),
        }

    @property
    def usage(self) -> Usage | None:
        outcome = self.review.outcome if self.review is not None else None
        return outcome.usage if outcome is not None else None


async def answer_agent_case(
    suite: Suite,
    arm: Arm,
    case: Case,
    *,
    config: Config,
    providers: Mapping[str, Provider],
    store: Store,
) -> CaseAnswer:
    """Run the Primary on the case's task in a fresh copy and verify what it left.

    Raises:
        StoreError: the store failed.
        CassetteMiss: a replayed request is not in the cassette.
    """
    task = agent_task(suite, case)
    caller = ModelCaller(Routes(config, providers), ledger=store.ledger, trace=store.traces)
    with task_workspace(task) as folder:
        watch = None
        if arm.mask is not None:
            policy = PublicationPolicy.OBSERVE_ONLY if arm.observe_only else None
            runner = ReviewRunner(caller, packet_max_chars=config.review.packet_max_chars)
            watch = _ArmReview(
                Reviewer(runner, config.review, policy=policy or PublicationPolicy.UPDATES_ONLY),
                Window.parse(arm.window),
                arm.mask,
                f"{case.id}/{arm.name}",
                folder,
                arm.observe_only,
                arm.mode,
            )
        loop = AgentLoop(
            caller,
            Workspace(folder),
            max_steps=AGENT_MAX_STEPS,
            publish=watch.hook if watch is not None else None,
        )
        result = await loop.run(task.statement)
        verdict = await task.verify(folder)
        end_sha256 = tree_sha256(folder)
    usage, cost, calls = result.usage, result.cost_usd, result.steps
    detail: dict[str, Any] = {
        "stop": result.stop.value,
        "steps": result.steps,
        "published": len(result.published),
        "verifier": verdict.value,
        "session_sha256": result.session.digest(),
        "primary_timeout": result.failure == "route_timeout",
    }
    if watch is not None:
        detail |= watch.facts(config, end_sha256)
        if watch.review is not None and watch.review.outcome is not None:
            calls += 1
        if watch.usage is not None:
            usage = usage + watch.usage
            route, _ = caller.routes.for_role(Role.REVIEWER)
            cost += cost_usd(
                watch.usage.prompt_tokens,
                watch.usage.completion_tokens,
                price_in=route.price_in or 0.0,
                price_out=route.price_out or 0.0,
            )
    detail |= {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cached_tokens": usage.cached_tokens,
    }
    failure = result.failure
    if failure is None and verdict in (VerifierResult.TIMEOUT, VerifierResult.UNAVAILABLE):
        failure = verdict.value
    return CaseAnswer(
        prediction=DONE if verdict is VerifierResult.PASSED else NOT_DONE,
        output=result.answer,
        failure=failure,
        cost_usd=cost,
        calls=calls,
        detail=detail,
    )
