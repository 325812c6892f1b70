"""Projection: what a reviewer sees of a session, for one window and one mask.

:func:`project` is pure: it reads a :class:`~foureyes.review.session.Session` and returns
a new value, never touching the session (docs/design.md 4, invariant 9).

**Window.** ``recent:K`` selects the last K *completed* steps (effective K = min(K,
available, ``max_k``)); ``current-turn`` selects the one open turn and needs exactly one.

**Balanced cut.** The cut lies at the turn start of the earliest selected step. Events
before it form the *prefix*, rendered natively as chat messages with their reasoning kept
(a provider rejects a tool loop whose assistant turns lost it); the prefix must be balanced
(every tool call answered inside it, every result matching a call), or the request would
be refused, so an unbalanced prefix is a skip. Events from the cut on form the *snapshot*:
one user message of flat text and image blocks, turn by turn and step by step, in which
every action is followed by its outcome, both labelled with the call id, so results that
arrived out of order are joined to the right call. The step still in flight is left out.

**Mask.** ``none`` shows everything (the control); ``reasoning-only`` drops every
reasoning block, including reasoning nested in tool results, and keeps visible text, tool
calls (ids and raw arguments) and results; ``action-only`` also drops the assistant's
visible text and images. The snapshot never says how much was dropped: the count is in
:class:`ProjectionMeta` only, which the reviewer never sees.

**Limits.** A snapshot over ``max_snapshot_chars`` characters, or a projection with more
than ``max_images`` images, is a :class:`ProjectionSkipped` carrying only metadata; a
projection is never truncated. Images go to the reviewer only as image blocks, and only
to a route that says it accepts them (``images = true`` in its config): a projection that
holds images is skipped for a text-only route (``images_unsupported``) or one whose
support is unknown (``images_unknown``), its image count in the metadata, rather than
sent as images the route may refuse or as placeholders the reviewer cannot see.

Untrusted text in the snapshot (user messages, assistant text and reasoning, tool
arguments and results) sits in :func:`~foureyes.llm.prompting.data_block` envelopes, and
the snapshot opens with :data:`~foureyes.llm.prompting.DATA_RULE` (invariant 7).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any, Literal

from foureyes.llm.provider import ChatMessage
from foureyes.review._native import NativeRendering, native_rendering
from foureyes.review._snapshot import Snapshot
from foureyes.review.session import Session

__all__ = [
    "MAX_RECENT_STEPS",
    "Mask",
    "Projection",
    "ProjectionMeta",
    "ProjectionSkipped",
    "SkipReason",
    "Window",
    "native_messages",
    "project",
]

MAX_RECENT_STEPS = 64
"""The largest K a ``recent:K`` window takes; a larger request is served with this many."""


class Mask(StrEnum):
    """What a projection hides from the reviewer."""

    NONE = "none"
    """Nothing: the full fork, the control arm."""
    REASONING_ONLY = "reasoning-only"
    """Reasoning blocks, also those nested in tool results."""
    ACTION_ONLY = "action-only"
    """Reasoning and the assistant's visible text and images: only actions and outcomes."""

    @property
    def shows_reasoning(self) -> bool:
        """Whether reasoning blocks are shown."""
        return self is Mask.NONE

    @property
    def shows_text(self) -> bool:
        """Whether the assistant's visible text and images are shown."""
        return self is not Mask.ACTION_ONLY


class SkipReason(StrEnum):
    """Why a projection was not made; no model is called for a skipped projection."""

    EMPTY_SESSION = "empty_session"
    """The session has no events."""
    NO_STEPS = "no_steps"
    """The window holds no completed step."""
    NO_OPEN_TURN = "no_open_turn"
    """``current-turn`` on a session whose turns have all ended."""
    SEVERAL_OPEN_TURNS = "several_open_turns"
    """``current-turn`` on a session with more than one open turn: which is current is unknown."""
    UNBALANCED_PREFIX = "unbalanced_prefix"
    """The native prefix has a tool call without result or a result without call."""
    OVER_CHARS = "over_chars"
    """The snapshot is longer than ``max_snapshot_chars``."""
    OVER_IMAGES = "over_images"
    """The projection holds more than ``max_images`` images."""
    IMAGES_UNSUPPORTED = "images_unsupported"
    """The projection holds images and the reviewer's route takes none (``images = false``)."""
    IMAGES_UNKNOWN = "images_unknown"
    """The projection holds images and the reviewer's route does not say whether it takes
    them (``images`` unset)."""


@dataclass(frozen=True)
class Window:
    """Which part of the session is reviewed (``recent:K`` or ``current-turn``)."""

    kind: Literal["recent", "current-turn"]
    """``recent``: the last K completed steps; ``current-turn``: the one open turn."""
    k: int | None = None
    """K of ``recent`` (at least 1); ``None`` for ``current-turn``."""

    def __post_init__(self) -> None:
        if self.kind == "recent" and (type(self.k) is not int or self.k < 1):
            raise ValueError(f"window recent needs K >= 1, got {self.k!r}")
        if self.kind == "current-turn" and self.k is not None:
            raise ValueError("window current-turn takes no K")
        if self.kind not in ("recent", "current-turn"):
            raise ValueError(f"unknown window kind {self.kind!r}")

    @classmethod
    def recent(cls, k: int) -> Window:
        """The last ``k`` completed steps."""
        return cls("recent", k)

    @classmethod
    def current_turn(cls) -> Window:
        """The one open turn."""
        return cls("current-turn")

    @classmethod
    def parse(cls, spec: str) -> Window:
        """Read ``recent:K`` or ``current-turn``.

        Raises:
            ValueError: ``spec`` is neither.
        """
        text = spec.strip()
        if text == "current-turn":
            return cls.current_turn()
        kind, sep, k = text.partition(":")
        if kind == "recent" and sep and k.isascii() and k.isdigit():
            return cls.recent(int(k))
        raise ValueError(f"window must be 'recent:K' (K >= 1) or 'current-turn', got {spec!r}")

    def __str__(self) -> str:
        return self.kind if self.k is None else f"{self.kind}:{self.k}"


@dataclass(frozen=True)
class ProjectionMeta:
    """Facts about a projection (or a skipped one); never shown to the reviewer."""

    window: str
    """The window as written (``recent:3``, ``current-turn``)."""
    mask: Mask
    """The mask applied."""
    requested_k: int | None
    """K as asked for (``None`` for ``current-turn``)."""
    effective_k: int | None
    """K served: min(requested, completed steps available, :data:`MAX_RECENT_STEPS`)."""
    turns: int
    """Turns shown in the snapshot."""
    steps: int
    """Steps shown in the snapshot (the selected ones and the earlier steps of their turns)."""
    omitted_reasoning_blocks: int
    """Reasoning blocks the mask dropped from the snapshot."""
    chars: int
    """Characters of snapshot text."""
    images: int
    """Images in the prefix and the snapshot."""
    cut: int | None = None
    """Index of the first event in the snapshot; ``None`` when no cut was made."""
    prefix_messages: int = 0
    """Messages in the native prefix."""

    def to_dict(self) -> dict[str, Any]:
        """The metadata as JSON-ready values."""
        return asdict(self) | {"mask": self.mask.value}


@dataclass(frozen=True)
class Projection:
    """A projection ready to become a review request."""

    prefix: tuple[ChatMessage, ...]
    """The events before the cut as native chat messages, reasoning kept (no system)."""
    snapshot: ChatMessage
    """One user message of text and image blocks: the selected part of the session."""
    meta: ProjectionMeta
    """Metadata."""

    @property
    def snapshot_text(self) -> str:
        """The snapshot's text blocks joined."""
        return self.snapshot.text


@dataclass(frozen=True)
class ProjectionSkipped:
    """No projection: why, with metadata only (no session text)."""

    reason: SkipReason
    """Why the projection was skipped."""
    meta: ProjectionMeta
    """What was measured before skipping."""


def project(
    session: Session,
    window: Window,
    mask: Mask,
    *,
    max_snapshot_chars: int,
    max_images: int,
    max_k: int = MAX_RECENT_STEPS,
    images: bool | None = None,
) -> Projection | ProjectionSkipped:
    """Project ``session`` through ``window`` and ``mask`` (see the module doc).

    Args:
        session: the session; it is only read.
        window: which part to review.
        mask: what to hide.
        max_snapshot_chars: longest snapshot accepted (``review.max_snapshot_chars``).
        max_images: most images accepted (``review.max_images``).
        max_k: cap on K of ``recent:K``.
        images: whether the reviewer's route accepts images (its ``images`` config):
            ``True``, ``False``, or ``None`` when unknown. Unless ``True``, a projection
            holding any image is skipped.
    """
    requested = window.k
    empty = ProjectionMeta(str(window), mask, requested, None, 0, 0, 0, 0, 0)
    if not session.events:
        return ProjectionSkipped(SkipReason.EMPTY_SESSION, empty)
    effective: int | None = None
    if window.kind == "recent":
        assert requested is not None
        completed = [s for s in session.steps() if s.completed]
        effective = min(requested, len(completed), max_k)
        if effective == 0:
            return ProjectionSkipped(SkipReason.NO_STEPS, replace(empty, effective_k=0))
        cut = min(session.turn_at(s.start).start for s in completed[-effective:])
    else:
        open_turns = session.open_turns()
        if not open_turns:
            return ProjectionSkipped(SkipReason.NO_OPEN_TURN, empty)
        if len(open_turns) > 1:
            return ProjectionSkipped(SkipReason.SEVERAL_OPEN_TURNS, empty)
        if not any(s.completed for s in open_turns[0].steps):
            return ProjectionSkipped(SkipReason.NO_STEPS, empty)
        cut = open_turns[0].start
    prefix = native_rendering(session).prefix(cut)
    snapshot = Snapshot(session, cut, reasoning=mask.shows_reasoning, text=mask.shows_text)
    meta = ProjectionMeta(
        window=str(window),
        mask=mask,
        requested_k=requested,
        effective_k=effective,
        turns=len(snapshot.turns),
        steps=snapshot.steps,
        omitted_reasoning_blocks=snapshot.omitted,
        chars=snapshot.chars,
        images=prefix.images + snapshot.images,
        cut=cut,
        prefix_messages=len(prefix.messages),
    )
    # Invariant 9: a projection that does not fit is skipped whole, never cut short.
    if not prefix.balanced:
        return ProjectionSkipped(SkipReason.UNBALANCED_PREFIX, meta)
    if meta.images and images is not True:
        # Images only to a route known to take them: neither sent blind nor replaced by
        # placeholders the reviewer would judge without seeing.
        unsupported = images is False
        reason = SkipReason.IMAGES_UNSUPPORTED if unsupported else SkipReason.IMAGES_UNKNOWN
        return ProjectionSkipped(reason, meta)
    if meta.chars > max_snapshot_chars:
        return ProjectionSkipped(SkipReason.OVER_CHARS, meta)
    if meta.images > max_images:
        return ProjectionSkipped(SkipReason.OVER_IMAGES, meta)
    message = ChatMessage(role="user", content=tuple(snapshot.parts))
    return Projection(prefix.messages, message, meta)


def native_messages(session: Session, end: int | None = None) -> tuple[ChatMessage, ...]:
    """``session.events[:end]`` as the chat messages the primary model was sent.

    User messages become ``user`` messages, each assistant message one ``assistant``
    message (text as content, reasoning as ``reasoning_content``, tool-call blocks as
    ``tool_calls``; a :class:`~foureyes.review.session.ToolCall` event joins the tool calls
    of its step's assistant message), and each result a ``tool`` message. Nested reasoning
    of a result follows its text; markers (turn and step starts and ends) leave no trace.
    The system messages are not included.
    """
    if end is None or end >= len(session.events):
        return tuple(native_rendering(session).messages)
    return tuple(NativeRendering(session.events[:end]).messages)
