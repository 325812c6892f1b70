"""The context-intervention ensemble: several views of one checkpoint, compared, not voted.

:func:`run_ensemble` reviews the same session concurrently through several
views (the full fork, reasoning-only, action-only, several depths, another
route), each through the one runner, and never publishes: every view runs
``observe-only``. :func:`compress` then reports, without counting votes:

- **stable**: items every answered view produced;
- **full only**: items produced only by views that saw the reasoning (mask ``none``);
- **flips**: decisions that change under masking, against the control view (the first
  unmasked view on the default route): the packet's status, or the kind or certainty of
  an item both produced;
- **earliest divergence**: of the masked views that differ from the control, the one
  masking the fewest steps (the projection's ``steps``);
- **cheapest discriminating check**: among ``suggestion`` items that not every answered
  view produced (so they separate the views), the shortest, as the cheapest proposal
  to act on.

Items are compared by their content trimmed and case-folded, the same key the packet
contract uses for duplicates. Paraphrases count as different items: no model judges
sameness here, only code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Deadline
from foureyes.core.errors import UsageError
from foureyes.review.packet import ItemKind, PacketItem, ReviewPacket
from foureyes.review.projection import Mask, Window
from foureyes.review.publication import PublicationPolicy
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, SessionReview
from foureyes.review.runner import ReviewTrigger
from foureyes.review.session import Session

__all__ = [
    "Divergence",
    "Ensemble",
    "EnsembleSummary",
    "Flip",
    "View",
    "ViewResult",
    "compress",
    "run_ensemble",
    "standard_views",
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
    field: Literal["status", "kind", "certainty"]
    """What differs."""
    content: str | None
    """The item's content as the control wrote it (``None`` for the status)."""
    control: str
    """The control's value."""
    masked: str
    """The masked view's value."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """The masked view, masking the fewest steps, whose packet differs from the control's."""

    view: str
    """The view."""
    steps: int
    """Steps its projection showed (and masked)."""
    status_changed: bool
    """Whether its status differs from the control's."""


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
    """Decisions that change under masking, against the control."""
    earliest_divergence: Divergence | None
    """The least-masked view that differs from the control."""
    cheapest_check: str | None
    """The shortest suggestion that not every answered view made."""


@dataclass(frozen=True, slots=True)
class Ensemble:
    """The views' results and their summary."""

    results: tuple[ViewResult, ...]
    """One result per view, in view order."""
    summary: EnsembleSummary
    """The compression of ``results``."""


def _first_items(packets: Sequence[ReviewPacket], keys: set[str]) -> tuple[PacketItem, ...]:
    """Items whose key is in ``keys``, each once, in the order the packets give them."""
    chosen: dict[str, PacketItem] = {}
    for packet in packets:
        for item in packet.items:
            if item.key in keys and item.key not in chosen:
                chosen[item.key] = item
    return tuple(chosen.values())


def _flips(name: str, control: ReviewPacket, masked: ReviewPacket) -> list[Flip]:
    flips = []
    if control.status is not masked.status:
        flips.append(Flip(name, "status", None, control.status.value, masked.status.value))
    theirs = {item.key: item for item in masked.items}
    for item in control.items:
        other = theirs.get(item.key)
        if other is None:
            continue
        if other.kind is not item.kind:
            flips.append(Flip(name, "kind", item.content, item.kind.value, other.kind.value))
        if other.certainty is not item.certainty:
            flips.append(
                Flip(name, "certainty", item.content, item.certainty.value, other.certainty.value)
            )
    return flips


def _shape(packet: ReviewPacket) -> tuple[str, frozenset[str]]:
    return packet.status.value, frozenset(item.key for item in packet.items)


def compress(results: Sequence[ViewResult]) -> EnsembleSummary:
    """Compress the views' packets without voting (the rules are in the module doc)."""
    answered = [r for r in results if r.packet is not None]
    packets = [r.packet for r in answered if r.packet is not None]
    unanswered = tuple((r.view.name, r.why_not or "") for r in results if r.packet is None)
    key_sets = [{item.key for item in p.items} for p in packets]
    every = set.intersection(*key_sets) if len(key_sets) >= 2 else set()
    full = [r.packet for r in answered if r.view.mask is Mask.NONE and r.packet]
    masked = [r for r in answered if r.view.mask is not Mask.NONE]
    full_keys = set().union(*({i.key for i in p.items} for p in full)) if full else set()
    masked_keys = set().union(*({i.key for i in r.packet.items} for r in masked if r.packet))
    full_only = _first_items(full, full_keys - masked_keys) if masked else ()
    control = next((r for r in answered if r.view.mask is Mask.NONE and r.view.route is None), None)
    flips: list[Flip] = []
    divergence: Divergence | None = None
    if control is not None and control.packet is not None:
        for result in masked:
            assert result.packet is not None
            flips += _flips(result.view.name, control.packet, result.packet)
        differing = [r for r in masked if r.packet and _shape(r.packet) != _shape(control.packet)]
        if differing:
            first = min(differing, key=lambda r: r.review.meta.steps)  # stable: view order ties
            assert first.packet is not None
            divergence = Divergence(
                first.view.name,
                first.review.meta.steps,
                first.packet.status != control.packet.status,
            )
    checks = [
        item
        for packet in packets
        for item in packet.items
        if item.kind is ItemKind.SUGGESTION and item.key not in every
    ]
    cheapest = min(checks, key=lambda i: (len(i.content.strip()), i.key), default=None)
    return EnsembleSummary(
        control=control.view.name if control else None,
        answered=tuple(r.view.name for r in answered),
        unanswered=unanswered,
        stable=_first_items(packets, every),
        full_only=full_only,
        flips=tuple(flips),
        earliest_divergence=divergence,
        cheapest_check=cheapest.content if cheapest else None,
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
    return Ensemble(results, compress(results))
