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

import asyncio
import json
import re
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foureyes.config import Config
from foureyes.core.budget import cost_usd
from foureyes.core.deadline import Deadline
from foureyes.core.digest import sha256_hex
from foureyes.core.overlap import matches
from foureyes.core.roles import Role
from foureyes.evals.agent import AgentLoop, AgentResult, Checkpoint, Fork, StopReason
from foureyes.evals.agent_tasks import AgentTask, agent_task, task_workspace
from foureyes.evals.arms import CaseAnswer
from foureyes.evals.suite import Arm, ArmCheck, Case, Suite, tree_files, tree_sha256
from foureyes.evals.verify import VerifierResult
from foureyes.evals.workspace import ReadOnlyTools, Workspace
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import Provider, Usage
from foureyes.llm.routes import Routes
from foureyes.review.deliberate import DELIBERATE_TOOL
from foureyes.review.packet import PacketStatus, ReviewPacket, check_packet, review_instruction
from foureyes.review.projection import Mask, Window
from foureyes.review.publication import PublicationPolicy
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, SessionReview
from foureyes.review.runner import ReviewReason, ReviewRunner
from foureyes.review.session import (
    AssistantMessage,
    ReasoningBlock,
    Session,
    TextBlock,
    ToolCallBlock,
)
from foureyes.store import Store

__all__ = [
    "AGENT_MAX_STEPS",
    "AGENT_RUN_KIND",
    "DONE",
    "NOT_DONE",
    "PREFIX_DEADLINE",
    "Prefix",
    "Prefixes",
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
    review_deadline_s: float = 300.0
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
            deadline=Deadline.after(self.review_deadline_s),
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


@dataclass(frozen=True, slots=True)
class Prefix:
    """The Primary's run of one case and sample up to its first turn stop.

    Every arm of that case and sample that leaves the Primary's route and tools as they
    are starts from it (:meth:`AgentLoop.resume`), so the arms differ only after the
    review: a correction is the packet's doing, not a second sample's.
    """

    result: AgentResult | None
    """The run as it ended at its turn stop (``None``: it failed, :attr:`failure`)."""
    fork: Fork | None
    """Its turn stop; ``None`` when it never stopped (step budget, a failed or
    unfinished call): then no review runs and every arm is the prefix."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    """The workspace's files as the run left them (:func:`tree_files`)."""
    trace_id: str | None = None
    """The trace run holding its model calls."""
    failure: str | None = None
    """Why there is no prefix (a reason code): every arm of the case and sample fails alike."""

    @property
    def sha256(self) -> str | None:
        """The digest of its session: the same in every arm that shares it."""
        return self.result.session.digest() if self.result is not None else None


PREFIX_DEADLINE = "prefix_deadline"
"""Reason of a pair whose shared prefix ran past the pair deadline (every arm alike)."""
_GRACE_S = 30.0
"""How long past its deadline a run may go before it is cut (its own deadline stops it
first: no call starts after it)."""


class Prefixes:
    """One :class:`Prefix` per case, sample, Primary route and seed, run once and shared.

    The first arm that asks runs it (as a task of its own, so cancelling one arm does not
    cancel the prefix the others wait for); the others wait for it. Kept for the run of
    one process: a resumed run recomputes the prefixes of the pairs it still has to run,
    and its detail's ``prefix_sha256`` shows which pairs share one.
    """

    def __init__(self) -> None:
        """An empty cache."""
        self._runs: dict[tuple[str, ...], asyncio.Task[Prefix]] = {}

    async def get(
        self, key: tuple[str, ...], make: Callable[[], Coroutine[Any, Any, Prefix]]
    ) -> Prefix:
        """The prefix of ``key``, running ``make`` the first time it is asked for."""
        task = self._runs.get(key)
        if task is None:
            task = self._runs[key] = asyncio.ensure_future(make())
        return await asyncio.shield(task)

    async def close(self) -> None:
        """Cancel prefixes still running (the run is over or stopped)."""
        for task in self._runs.values():
            task.cancel()
        await asyncio.gather(*self._runs.values(), return_exceptions=True)


def _restore(folder: Path, files: Mapping[str, bytes]) -> None:
    """Make ``folder``'s files exactly ``files`` (caches aside, as :func:`tree_files`)."""
    for name in tree_files(folder).keys() - files.keys():
        (folder / name).unlink()
    for name, data in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


async def _start_trace(store: Store, conversation_id: str, meta: dict[str, Any]) -> str:
    return await store.traces.start_run(AGENT_RUN_KIND, conversation_id=conversation_id, meta=meta)


AGENT_RUN_KIND = "eval_primary"
"""The trace kind of the Primary's runs: a prefix, and each arm's run from it."""


async def _run_prefix(
    task: AgentTask,
    caller: ModelCaller,
    store: Store,
    *,
    conversation_id: str,
    sample: int,
    seed: int | None,
    deadline_s: float,
) -> Prefix:
    """Run the Primary alone on a fresh copy of the task up to its first turn stop."""
    trace_id = await _start_trace(
        store, conversation_id, {"case": task.case.id, "sample": sample, "prefix": True}
    )
    stops: list[Checkpoint] = []

    async def capture(point: Checkpoint) -> ReviewPacket | None:
        if point.stopping:
            stops.append(point)
        return None  # never a packet: the run ends at its first stop

    try:
        async with asyncio.timeout(deadline_s + _GRACE_S):
            with task_workspace(task) as folder:
                loop = AgentLoop(
                    caller,
                    Workspace(folder),
                    max_steps=AGENT_MAX_STEPS,
                    deadline_s=deadline_s,
                    publish=capture,
                    trace_id=trace_id,
                    seed=seed,
                )
                result = await loop.run(task.statement)
                files = tree_files(folder)
    except TimeoutError:
        await store.traces.finish_run(trace_id, outcome="failed", reason=PREFIX_DEADLINE)
        return Prefix(None, None, trace_id=trace_id, failure=PREFIX_DEADLINE)
    await store.traces.finish_run(trace_id, outcome=result.stop.value, reason=result.failure)
    fork = Fork.at(stops[-1], result) if stops and result.stop is StopReason.COMPLETED else None
    return Prefix(result, fork, files, trace_id)


_SIMPLE_CHECK = "python check.py"
_CHECK_OUTPUT_CHARS = 600


@dataclass(slots=True)
class _SimpleVerifier:
    """The simple-verifier arm's hook: the visible check re-run at the turn stop.

    Its outcome is shown as a packet ("re-run the tests"); no model is called.
    """

    folder: Path
    max_chars: int
    shown_sha256: str | None = None

    async def hook(self, point: Checkpoint) -> ReviewPacket | None:
        if not point.stopping or self.shown_sha256 is not None:
            return None
        self.shown_sha256 = tree_sha256(self.folder)
        outcome = await Workspace(self.folder).call("run", json.dumps({"command": _SIMPLE_CHECK}))
        output = outcome.content[-_CHECK_OUTPUT_CHARS:]
        content = (
            f"The repository's check was re-run (`{_SIMPLE_CHECK}`) before you finish; "
            f"make sure the whole task statement holds, not only this check.\n{output}"
        )
        wire = {
            "role": "masked-review",
            "status": "update",
            "items": [{"kind": "observation", "certainty": "certain", "content": content}],
        }
        checked = check_packet(json.dumps(wire, ensure_ascii=False), max_chars=self.max_chars)
        return checked.packet

    def facts(self, end_sha256: str) -> dict[str, Any]:
        shown = self.shown_sha256 is not None
        return {
            "reviewed": shown,
            "shown": shown,
            "adopted": (end_sha256 != self.shown_sha256) if shown else None,
            "packet_status": "update" if shown else None,
        }


def _deliberate_calls(session: Session) -> int:
    return sum(
        1
        for event in session.events
        if isinstance(event, AssistantMessage)
        for block in event.blocks
        if isinstance(block, ToolCallBlock) and block.name == DELIBERATE_TOOL
    )


async def answer_agent_case(
    suite: Suite,
    arm: Arm,
    case: Case,
    *,
    config: Config,
    providers: Mapping[str, Provider],
    store: Store,
    prefixes: Prefixes,
    sample: int = 1,
    seed: int | None = None,
    deadline_s: float = 1800.0,
    review_deadline_s: float = 300.0,
    conversation_id: str = "",
) -> CaseAnswer:
    """Fork the case's shared prefix for ``arm``, review at its stop, verify what is left.

    The prefix (:class:`Prefix`: the Primary alone up to its first turn stop) is run once
    per case, sample, Primary route and seed and shared by the arms. The baseline is the
    prefix; a reviewing arm reviews at its stop under ``review_deadline_s`` (a review that
    misses it is that arm's ``review_timeout``: nothing is shown, and the pair is scored
    on what the Primary did, never failed for it) and the Primary goes on from there when
    a packet is shown, until ``deadline_s`` (no call starts after it; the verifier then
    judges the workspace as it stands). The ``deliberate`` arm offers the Primary the tool
    from its first step, so it runs a sample of its own.

    Raises:
        StoreError: the store failed.
        CassetteMiss: a replayed request is not in the cassette.
    """
    task = agent_task(suite, case)
    caller = ModelCaller(Routes(config, providers), ledger=store.ledger, trace=store.traces)
    conversation_id = conversation_id or f"eval-{case.id}-{sample}"
    reviewer_policy = (
        PublicationPolicy.OBSERVE_ONLY
        if arm.observe_only
        else PublicationPolicy.ALL
        if arm.always_show
        else PublicationPolicy.UPDATES_ONLY
    )
    runner = ReviewRunner(caller, packet_max_chars=config.review.packet_max_chars)
    reviewer = Reviewer(runner, config.review, policy=reviewer_policy)
    prefix: Prefix | None = None
    if arm.check is not ArmCheck.DELIBERATE:
        key = (case.id, str(sample), config.roles.route_for(Role.PRIMARY), str(seed))

        async def make() -> Prefix:
            return await _run_prefix(
                task,
                caller,
                store,
                conversation_id=conversation_id,
                sample=sample,
                seed=seed,
                deadline_s=deadline_s,
            )

        prefix = await prefixes.get(key, make)
        if prefix.result is None:
            return CaseAnswer(
                prediction=None,
                output="",
                failure=prefix.failure,
                detail={"prefix_sha256": None, "prefix_trace_id": prefix.trace_id},
            )
    watch: _ArmReview | None = None
    simple: _SimpleVerifier | None = None
    timeout: str | None = None
    trace_id: str | None = None
    with task_workspace(task) as folder:
        if prefix is not None:
            _restore(folder, prefix.files)
        hook = None
        if arm.check is ArmCheck.SIMPLE_VERIFIER:
            simple = _SimpleVerifier(folder, config.review.packet_max_chars)
            hook = simple.hook
        elif arm.check is ArmCheck.REVIEW and arm.mask is not None:
            watch = _ArmReview(
                reviewer,
                Window.parse(arm.window),
                arm.mask,
                f"{case.id}/{sample}/{arm.name}",
                folder,
                arm.observe_only,
                arm.mode,
                review_deadline_s=min(review_deadline_s, deadline_s),
            )
            hook = watch.hook
        if prefix is not None and (prefix.fork is None or hook is None):
            assert prefix.result is not None
            result = prefix.result  # nothing to review at, or nothing reviews: the prefix
        else:
            trace_id = await _start_trace(
                store,
                conversation_id,
                {
                    "case": case.id,
                    "sample": sample,
                    "arm": arm.name,
                    "fork_of": prefix.trace_id if prefix is not None else None,
                },
            )
            loop = AgentLoop(
                caller,
                Workspace(folder),
                max_steps=AGENT_MAX_STEPS,
                deadline_s=deadline_s,
                publish=hook,
                reviewer=reviewer if arm.check is ArmCheck.DELIBERATE else None,
                trace_id=trace_id,
                seed=seed,
            )
            if prefix is not None:
                assert prefix.fork is not None
                result = await loop.resume(prefix.fork)
                if result.failure == "deadline_exceeded":
                    timeout = "primary"  # out of time after the review, not in the prefix
            else:
                result = await loop.run(task.statement)
            await store.traces.finish_run(
                trace_id, outcome=result.stop.value, reason=result.failure
            )
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
        "sample": sample,
        "prefix_sha256": prefix.sha256 if prefix is not None else None,
        "prefix_trace_id": prefix.trace_id if prefix is not None else None,
        "trace_id": trace_id,
        "prefix_steps": prefix.result.steps if prefix is not None and prefix.result else None,
        "forked": prefix is not None and prefix.fork is not None,
        "end_sha256": end_sha256,
        "deliberate_calls": _deliberate_calls(result.session),
        "timeout": timeout,
    }
    if simple is not None:
        detail |= simple.facts(end_sha256)
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
        if detail.get("review_timeout"):
            detail["timeout"] = "review"
    detail |= {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cached_tokens": usage.cached_tokens,
    }
    failure = result.failure
    if failure == "deadline_exceeded" and timeout == "primary":
        failure = None  # out of time after the review: the verifier judges what it left
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
