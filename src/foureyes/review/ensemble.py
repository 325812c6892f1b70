"""The context-intervention ensemble: several views of one checkpoint, compared, not voted.

:func:`run_ensemble` reviews the same session concurrently through several
views (the full fork, reasoning-only, action-only, several depths, another
route), each through the one runner, and never publishes: every view runs
``observe-only``. :func:`compress` then reports, without counting votes:

- **stable**: items every answered view produced;
- **full only**: items produced only by views that saw the reasoning (mask ``none``);
- **flips**: decisions that change under masking, against the control view (the first
  unmasked view on the default route): the packet's status, the kind or certainty of an
  item both produced, or a **reversed conclusion**: a control item the masked view does
  not restate but contradicts (it says the negation or the opposite: "the fix is
  correct", "the fix is not correct"). A reversal is reported as such, never as a
  change of certainty: the two items are not the same item;
- **earliest divergence**: a point in the trajectory, not a view: for a masked view whose
  packet differs from the control's, the earliest step whose projection differs between
  the two (the first step whose reasoning, or text, one view hides and the other shows;
  a step in a native prefix shows everything). Of several such views, the one whose
  divergence step comes last is reported: the least masking that already changes the
  finding. Views whose projections do not differ at any step, but whose packets do,
  have no divergence: their difference is sampling, not masking;
- **cheapest discriminating check**: among ``suggestion`` items that not every answered
  view produced (so they separate the views), the one needing the fewest tool calls
  (:func:`calls_needed`), the earliest given on a tie.

Items are compared by :func:`foureyes.core.overlap.compare` (folded, tokenised into words
and Han characters, negators and hedges left out, Jaccard index at least
:data:`~foureyes.core.overlap.MATCH_THRESHOLD`, and a polarity read by a small rule set in
English and Chinese). Two items are the same when they compare
:attr:`~foureyes.core.overlap.Comparison.SAME` (a hedged restatement included); an item
that compares :attr:`~foureyes.core.overlap.Comparison.CONTRADICTS` is not the same item:
it counts as absent from the other view (so it is never stable, and a view holding it
differs), a contradiction of an item kept before is kept as a distinct item, and against
the control it is a reversed conclusion. Each item is compared with its best-matching
item of the other view: the same item when there is one, else the contradicting one. No
model judges sameness here, only code.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Deadline
from foureyes.core.errors import UsageError
from foureyes.core.fold import normalise
from foureyes.core.overlap import Comparison, compare, overlap
from foureyes.review.packet import ItemKind, PacketItem, ReviewPacket
from foureyes.review.projection import Mask, ProjectionMeta, Window
from foureyes.review.publication import PublicationPolicy
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, SessionReview
from foureyes.review.runner import ReviewTrigger
from foureyes.review.session import AssistantMessage, Session, Step, ToolCall, ToolResult

__all__ = [
    "Divergence",
    "Ensemble",
    "EnsembleSummary",
    "Flip",
    "View",
    "ViewResult",
    "calls_needed",
    "compress",
    "divergence_step",
    "run_ensemble",
    "standard_views",
    "tool_names",
]


@dataclass(frozen=True, slots=True)
class View:
    """One view of the checkpoint: a window, a mask and the route that reviews it."""

    name: str
    """Unique label of the view in its ensemble."""
    window: Window
    """Which part of the session is shown."""
    mask: Mask
    """What is hidden."""
    route: str | None = None
    """Another reviewer (a key of ``run_ensemble``'s ``reviewers``); ``None``: the default."""


def standard_views(
    depths: Sequence[int] = (1, 3), *, other_route: str | None = None
) -> tuple[View, ...]:
    """The full control, reasoning-only and action-only at each depth, and an optional route.

    The control is ``recent:`` the deepest depth with mask ``none``; with ``other_route``
    the same control is also reviewed by that route.

    Raises:
        UsageError: ``depths`` is empty or holds a depth below one.
    """
    if not depths or min(depths) < 1:
        raise UsageError(f"depths must be one or more positive integers, got {depths!r}")
    deepest = Window.recent(max(depths))
    views = [View("full", deepest, Mask.NONE)]
    for depth in sorted(set(depths)):
        for mask in (Mask.REASONING_ONLY, Mask.ACTION_ONLY):
            views.append(View(f"{mask.value}@recent:{depth}", Window.recent(depth), mask))
    if other_route is not None:
        views.append(View(f"full@{other_route}", deepest, Mask.NONE, route=other_route))
    return tuple(views)


@dataclass(frozen=True, slots=True)
class ViewResult:
    """One view and its review."""

    view: View
    """The view."""
    review: SessionReview
    """Its review (skipped, failed or accepted)."""

    @property
    def packet(self) -> ReviewPacket | None:
        """The accepted packet, if any."""
        return self.review.outcome.packet if self.review.outcome else None

    @property
    def why_not(self) -> str | None:
        """Why the view has no packet (a skip or a run reason); ``None`` when it has one."""
        if self.review.skipped is not None:
            return self.review.skipped.reason.value
        outcome = self.review.outcome
        return None if outcome is None or outcome.ok else outcome.reason.value


@dataclass(frozen=True, slots=True)
class Flip:
    """A decision that differs between the control and one masked view."""

    view: str
    """The masked view."""
    field: Literal["status", "kind", "certainty", "conclusion"]
    """What differs: ``conclusion`` when the masked view reverses the control's item."""
    content: str | None
    """The item's content as the control wrote it (``None`` for the status)."""
    control: str
    """The control's value (for a ``conclusion``: the control item's content)."""
    masked: str
    """The masked view's value (for a ``conclusion``: the content of its contradicting
    item)."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """The earliest step whose projection differs between the control and a disagreeing view."""

    step_id: str
    """The step's id."""
    turn: int
    """The 1-based ordinal of its turn."""
    step: int
    """The 1-based ordinal of the step in its turn."""
    views: tuple[str, str]
    """The control and the masked view whose packets differ."""
    status_changed: bool
    """Whether the masked view's status differs from the control's."""


@dataclass(frozen=True, slots=True)
class EnsembleSummary:
    """The ensemble compressed without voting (see the module doc)."""

    control: str | None
    """The control view, when it answered."""
    answered: tuple[str, ...]
    """Views with an accepted packet, in ensemble order."""
    unanswered: tuple[tuple[str, str], ...]
    """Views without a packet, with the skip or run reason."""
    stable: tuple[PacketItem, ...]
    """Items every answered view produced (needs two answered views)."""
    full_only: tuple[PacketItem, ...]
    """Items only unmasked views produced (needs an answered masked view)."""
    flips: tuple[Flip, ...]
    """Decisions that change under masking, against the control: status, kind, certainty
    and reversed conclusions."""
    earliest_divergence: Divergence | None
    """Where masking first changes the finding (see the module doc)."""
    cheapest_check: str | None
    """The discriminating suggestion needing the fewest tool calls."""
    cheapest_check_calls: int | None = None
    """The tool calls it needs (:func:`calls_needed`)."""


@dataclass(frozen=True, slots=True)
class Ensemble:
    """The views' results and their summary."""

    results: tuple[ViewResult, ...]
    """One result per view, in view order."""
    summary: EnsembleSummary
    """The compression of ``results``."""


def _best(
    item: PacketItem, items: Sequence[PacketItem], wanted: Comparison = Comparison.SAME
) -> PacketItem | None:
    """The item of ``items`` that compares with ``item`` as ``wanted`` and overlaps it most.

    ``None`` when none does; the first on a tie.
    """
    best: PacketItem | None = None
    score = -1.0
    for other in items:
        if compare(item.content, other.content) is not wanted:
            continue
        value = overlap(item.content, other.content)
        if value > score:
            best, score = other, value
    return best


def _distinct(items: Sequence[PacketItem]) -> tuple[PacketItem, ...]:
    """``items`` in order, leaving out any that is the same as one kept before it.

    An item that contradicts one kept before is kept: it is another conclusion.
    """
    kept: list[PacketItem] = []
    for item in items:
        if _best(item, kept) is None:
            kept.append(item)
    return tuple(kept)


def _in(item: PacketItem, packet: ReviewPacket) -> bool:
    return _best(item, packet.items) is not None


def _flips(name: str, control: ReviewPacket, masked: ReviewPacket) -> list[Flip]:
    flips = []
    if control.status is not masked.status:
        flips.append(Flip(name, "status", None, control.status.value, masked.status.value))
    for item in control.items:
        other = _best(item, masked.items)
        if other is None:
            reversal = _best(item, masked.items, Comparison.CONTRADICTS)
            if reversal is not None:
                flips.append(Flip(name, "conclusion", item.content, item.content, reversal.content))
            continue
        if other.kind is not item.kind:
            flips.append(Flip(name, "kind", item.content, item.kind.value, other.kind.value))
        if other.certainty is not item.certainty:
            flips.append(
                Flip(name, "certainty", item.content, item.certainty.value, other.certainty.value)
            )
    return flips


def _differs(control: ReviewPacket, masked: ReviewPacket) -> bool:
    if control.status is not masked.status:
        return True
    return any(not _in(i, masked) for i in control.items) or any(
        not _in(i, control) for i in masked.items
    )


_HIDES: dict[Mask, frozenset[str]] = {
    Mask.NONE: frozenset(),
    Mask.REASONING_ONLY: frozenset({"reasoning"}),
    Mask.ACTION_ONLY: frozenset({"reasoning", "text"}),
}


def _step_contents(session: Session) -> dict[str, frozenset[str]]:
    """What a mask could hide in each step: ``reasoning`` and ``text`` (text or images)."""
    found: dict[str, set[str]] = {s.step_id: set() for s in session.steps()}
    for index, event in enumerate(session.events):
        step = session.step_at(index)
        if step is None:
            continue
        if isinstance(event, AssistantMessage):
            for block in event.blocks:
                if block.type == "reasoning":
                    found[step.step_id].add("reasoning")
                elif block.type in ("text", "image"):
                    found[step.step_id].add("text")
        elif isinstance(event, ToolResult) and event.reasoning:
            found[step.step_id].add("reasoning")
    return {k: frozenset(v) for k, v in found.items()}


def _hidden(meta: ProjectionMeta, step: Step, contents: frozenset[str]) -> frozenset[str]:
    if meta.cut is None or step.start < meta.cut:
        return frozenset()  # in the native prefix: shown whole
    return contents & _HIDES[meta.mask]


def divergence_step(session: Session, first: ProjectionMeta, second: ProjectionMeta) -> Step | None:
    """The earliest step of ``session`` whose projection differs between two views.

    A step differs when one view hides something of it (reasoning, or text) that the
    other shows; ``None`` when the two show every step alike.
    """
    contents = session.memo(("ensemble_step_contents",), _step_contents)
    in_flight = session.in_flight()
    for step in session.steps():
        if step == in_flight:
            continue
        kinds = contents[step.step_id]
        if _hidden(first, step, kinds) != _hidden(second, step, kinds):
            return step
    return None


_CODE = re.compile(r"`([^`]+)`")


def tool_names(session: Session) -> frozenset[str]:
    """The names of the primary's tools: its tool definitions and the calls it made."""
    names = {
        str(function.get("name"))
        for tool in session.tools
        if isinstance(function := tool.get("function"), Mapping) and function.get("name")
    }
    for event in session.events:
        if isinstance(event, AssistantMessage):
            names.update(b.name for b in event.blocks if b.type == "tool_call")
        elif isinstance(event, ToolCall):
            names.add(event.name)
    return frozenset(n for n in names if n.strip())


def calls_needed(content: str, tools: Collection[str]) -> int:
    """The tool calls a suggested check needs: its commands and the tools it names.

    Each inline code span (```` `pytest -x` ````) is one command to run; each distinct
    tool of ``tools`` named as a word outside them is one more call. At least one: a check
    is an action.
    """
    commands = _CODE.findall(content)
    rest = normalise(_CODE.sub(" ", content)).text
    named = 0
    for tool in tools:
        folded = normalise(tool).text.strip()
        if folded and re.search(rf"(?<![^\W_]){re.escape(folded)}(?![^\W_])", rest):
            named += 1
    return max(1, len(commands) + named)


def compress(results: Sequence[ViewResult], session: Session) -> EnsembleSummary:
    """Compress the views' packets of ``session`` without voting (rules in the module doc)."""
    answered = [r for r in results if r.packet is not None]
    packets = [r.packet for r in answered if r.packet is not None]
    unanswered = tuple((r.view.name, r.why_not or "") for r in results if r.packet is None)
    stable: tuple[PacketItem, ...] = ()
    if len(packets) >= 2:
        stable = _distinct([i for i in packets[0].items if all(_in(i, p) for p in packets[1:])])
    full = [r.packet for r in answered if r.view.mask is Mask.NONE and r.packet]
    masked = [r for r in answered if r.view.mask is not Mask.NONE]
    masked_packets = [r.packet for r in masked if r.packet]
    full_only: tuple[PacketItem, ...] = ()
    if masked:
        full_items = [i for p in full for i in p.items]
        full_only = _distinct([i for i in full_items if not any(_in(i, p) for p in masked_packets)])
    control = next((r for r in answered if r.view.mask is Mask.NONE and r.view.route is None), None)
    flips: list[Flip] = []
    divergence: Divergence | None = None
    if control is not None and control.packet is not None:
        for result in masked:
            assert result.packet is not None
            flips += _flips(result.view.name, control.packet, result.packet)
        latest: tuple[Step, ViewResult] | None = None
        for result in masked:
            assert result.packet is not None
            if not _differs(control.packet, result.packet):
                continue
            step = divergence_step(session, control.review.meta, result.review.meta)
            if step is not None and (latest is None or step.start > latest[0].start):
                latest = (step, result)
        if latest is not None:
            step, result = latest
            assert result.packet is not None
            turn = session.turn_at(step.start)
            divergence = Divergence(
                step.step_id,
                turn.ordinal,
                turn.steps.index(step) + 1,
                (control.view.name, result.view.name),
                result.packet.status is not control.packet.status,
            )
    checks = _distinct(
        [
            item
            for packet in packets
            for item in packet.items
            if item.kind is ItemKind.SUGGESTION and not all(_in(item, p) for p in packets)
        ]
    )
    names = tool_names(session)
    costs = [calls_needed(item.content, names) for item in checks]
    cheapest = min(range(len(checks)), key=lambda n: costs[n], default=None)
    return EnsembleSummary(
        control=control.view.name if control else None,
        answered=tuple(r.view.name for r in answered),
        unanswered=unanswered,
        stable=stable,
        full_only=full_only,
        flips=tuple(flips),
        earliest_divergence=divergence,
        cheapest_check=None if cheapest is None else checks[cheapest].content,
        cheapest_check_calls=None if cheapest is None else costs[cheapest],
    )


async def run_ensemble(
    reviewer: Reviewer,
    session: Session,
    views: Sequence[View],
    *,
    reviewers: Mapping[str, Reviewer] | None = None,
    mode: RequestMode = RequestMode.CACHE_ALIGNED,
    session_id: str | None = None,
    deadline: Deadline | None = None,
) -> Ensemble:
    """Review ``session`` through every view concurrently, then :func:`compress`.

    Each view is one one-shot run (its own call budget of one) under the shared
    ``deadline``, with trigger ``ensemble`` and policy ``observe-only``: nothing is ever
    published to the primary agent.

    Args:
        reviewer: the default reviewer.
        session: the session (only read).
        views: the views; names must be unique.
        reviewers: other reviewers by route key, for views that name a ``route``.
        mode: the request mode of every view.
        session_id: the host's id of the session, for the trace.
        deadline: shared by all views; by default only the routes' timeouts bound them.

    Raises:
        UsageError: two views share a name, or a view names a route with no reviewer.
    """
    others = reviewers or {}
    names = [v.name for v in views]
    if len(set(names)) != len(names):
        raise UsageError(f"ensemble view names must be unique, got {names}")
    missing = sorted({v.route for v in views if v.route is not None and v.route not in others})
    if missing:
        raise UsageError(f"no reviewer given for route(s) {', '.join(missing)}")
    shared = deadline or Deadline.never()

    async def one(view: View) -> ViewResult:
        chosen = reviewer if view.route is None else others[view.route]
        review = await chosen.review(
            session,
            window=view.window,
            mask=view.mask,
            mode=mode,
            session_id=session_id,
            deadline=shared,
            budget=CallBudget(1),
            trigger=ReviewTrigger.ENSEMBLE,
            policy=PublicationPolicy.OBSERVE_ONLY,
        )
        return ViewResult(view, review)

    results = tuple(await asyncio.gather(*(one(view) for view in views)))
    return Ensemble(results, compress(results, session))
