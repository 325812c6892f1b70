"""Projection: what a reviewer sees of a session, for one window and one mask.

:func:`project` is pure: it reads a :class:`~foureyes.review.session.Session` and returns
a new value, never touching the session (docs/design.md 4, invariant 9).

**Step.** A step is one model response with its tool calls and their outcomes: the span
from a :class:`~foureyes.review.session.StepStart` to its
:class:`~foureyes.review.session.StepEnd`, holding one assistant message (its reasoning,
text and tool-call blocks), the calls the host executed for it and their results. It is
*complete* once its end is recorded; the step still running at the end of the log is in
flight and never shown.

**Window.** Where the cut falls, always at a step boundary or a turn start:

- ``recent:K`` masks exactly the last K complete steps (effective K = min(K, complete
  steps, ``max_k``)); the cut is the start of the earliest of them, inside its turn if
  need be (at the turn start when that step is the turn's first, so the snapshot opens
  with the turn's user message);
- ``since-last-mutation`` masks the steps from the last one that called a mutating tool
  (one whose name is in ``mutating_tools``: edits, writes, patches, shell and run
  commands by default, ``review.mutating_tools``) to the end; a session without such a
  call is a skip (``no_mutation``);
- ``current-turn`` masks the one open turn and needs exactly one;
- ``all-turns`` masks every turn: the prefix is empty (the forced all-turns arm).

**Balanced cut.** Events before the cut form the *prefix*, rendered natively as chat
messages with their reasoning kept (a provider rejects a tool loop whose assistant turns
lost it). When the cut falls inside a turn, that turn's user message and earlier steps
stay in the prefix, native and unmasked, and the snapshot says the turn continues. The
prefix must be balanced (every tool call answered inside it, every result matching a
call), or the request would be refused: the cut moves back over incomplete (abandoned)
steps until it is, and a prefix that only masking another complete step could balance is
a skip. Events from the cut on form the *snapshot*: one user message of flat text and
image blocks, turn by turn and step by step. The calls of one model response form one
*action batch*: every call is listed first, then the outcomes, each keyed by its call id,
so calls issued together never read as a sequence and results that arrived out of order
are joined to the right call. :attr:`ProjectionMeta.effective_k` is the number of complete steps in
the snapshot, for every window: what was masked.

**Mask.** ``none`` shows everything (the control); ``reasoning-only`` drops every
reasoning block, including reasoning nested in tool results, and keeps visible text, tool
calls (ids and raw arguments) and results; ``action-only`` also drops the assistant's
visible text and images. The snapshot never says how much was dropped: the count is in
:class:`ProjectionMeta` only, which the reviewer never sees.

**Task view.** ``task_only=True`` is the fresh view, for a reviewer that is to work the
task out on its own rather than read the agent's work: the snapshot holds the task as the
user stated it, the session's user messages (source ``user``, outside every step) turn by
turn with their images, and nothing of the agent's steps, whatever the mask: no
reasoning, visible text, tool call or outcome, and no turn end. It covers the whole
session, so it takes the ``all-turns`` window only (any other is a ``ValueError``) and has
no native prefix. Its metadata says so (``task_only``): ``effective_k`` counts the
complete steps it hides whole, ``steps`` is 0 (none is shown), ``omitted_reasoning_blocks``
counts every reasoning block outside the step in flight, and ``cut`` is ``None``. A session
with no user message to show is a skip (``no_task``); one with no complete step yet is
not, since the task is all it shows. The size and image limits below apply to it as to
any projection.

**Limits.** A snapshot over ``max_snapshot_chars`` characters, or a projection with more
than ``max_images`` images, is a :class:`ProjectionSkipped` carrying only metadata; a
projection is never truncated. Images go to the reviewer only as image blocks, and only
to a route that says it accepts them (``images = true`` in its config): a projection that
holds images is skipped for a text-only route (``images_unsupported``) or one whose
support is unknown (``images_unknown``), its image count in the metadata, rather than
sent as images the route may refuse or as placeholders the reviewer cannot see. The
whole request built from a projection is held to the reviewer route's token budget
(``max_request_tokens``): over it, the review is skipped (``over_tokens``) with the
estimate and the budget in the metadata (:class:`~foureyes.review.reviewer.Reviewer`).

Untrusted text in the snapshot (user messages, assistant text and reasoning, tool
arguments and results) sits in :func:`~foureyes.llm.prompting.data_block` envelopes, and
the snapshot opens with :data:`~foureyes.llm.prompting.DATA_RULE` (invariant 7).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any, Literal

from foureyes.config import DEFAULT_MUTATING_TOOLS
from foureyes.llm.prompting import DATA_RULE, data_block
from foureyes.llm.provider import ChatMessage, ImagePart, TextPart
from foureyes.review._native import NativeRendering, native_rendering
from foureyes.review._snapshot import Snapshot
from foureyes.review.session import (
    AssistantMessage,
    MessageSource,
    Session,
    Step,
    ToolCall,
    ToolResult,
    UserMessage,
)

__all__ = [
    "DEFAULT_MUTATING_TOOLS",
    "MAX_RECENT_STEPS",
    "Mask",
    "Projection",
    "ProjectionMeta",
    "ProjectionSkipped",
    "SkipReason",
    "Window",
    "WindowKind",
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
    """The window holds no complete step."""
    NO_MUTATION = "no_mutation"
    """``since-last-mutation`` on a session in which no shown step called a mutating tool."""
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
    OVER_TOKENS = "over_tokens"
    """The whole review request (system, tools, prefix, snapshot, instruction) is estimated
    at more tokens than the reviewer route's ``max_request_tokens``."""
    NO_TASK = "no_task"
    """The task view of a session with no user message (source ``user``) outside the
    agent's steps: there is no task to show."""


WindowKind = Literal["recent", "since-last-mutation", "current-turn", "all-turns"]
"""The kinds of window (see the module doc)."""
_NO_K = ("since-last-mutation", "current-turn", "all-turns")


@dataclass(frozen=True)
class Window:
    """Which part of the session is reviewed (see the module doc for each kind)."""

    kind: WindowKind
    """``recent``: the last K complete steps; ``since-last-mutation``: the steps from the
    last mutating call on; ``current-turn``: the one open turn; ``all-turns``: all of it."""
    k: int | None = None
    """K of ``recent`` (at least 1); ``None`` for every other kind."""

    def __post_init__(self) -> None:
        if self.kind == "recent":
            if type(self.k) is not int or self.k < 1:
                raise ValueError(f"window recent needs K >= 1, got {self.k!r}")
        elif self.kind in _NO_K:
            if self.k is not None:
                raise ValueError(f"window {self.kind} takes no K")
        else:
            raise ValueError(f"unknown window kind {self.kind!r}")

    @classmethod
    def recent(cls, k: int) -> Window:
        """The last ``k`` complete steps."""
        return cls("recent", k)

    @classmethod
    def since_last_mutation(cls) -> Window:
        """The steps from the last one that called a mutating tool."""
        return cls("since-last-mutation")

    @classmethod
    def current_turn(cls) -> Window:
        """The one open turn."""
        return cls("current-turn")

    @classmethod
    def all_turns(cls) -> Window:
        """Every turn of the session."""
        return cls("all-turns")

    @classmethod
    def parse(cls, spec: str) -> Window:
        """Read ``recent:K``, ``since-last-mutation``, ``current-turn`` or ``all-turns``.

        Raises:
            ValueError: ``spec`` is none of them.
        """
        text = spec.strip()
        if text in _NO_K:
            return cls(text)  # type: ignore[arg-type]  # checked against the literal's values
        kind, sep, k = text.partition(":")
        if kind == "recent" and sep and k.isascii() and k.isdigit() and int(k) >= 1:
            return cls.recent(int(k))
        raise ValueError(
            "window must be 'recent:K' (K >= 1), 'since-last-mutation', 'current-turn' or"
            f" 'all-turns', got {spec!r}"
        )

    def __str__(self) -> str:
        return self.kind if self.k is None else f"{self.kind}:{self.k}"


@dataclass(frozen=True)
class ProjectionMeta:
    """Facts about a projection (or a skipped one); never shown to the reviewer."""

    window: str
    """The window as written (``recent:3``, ``since-last-mutation``, ``current-turn``)."""
    mask: Mask
    """The mask applied."""
    requested_k: int | None
    """K as asked for (``None`` for the windows that take none)."""
    effective_k: int | None
    """Complete steps masked, i.e. shown in the snapshot; for ``recent:K`` min(K, complete
    steps available, ``max_k``). ``None`` when the window was not resolved."""
    turns: int
    """Turns shown in the snapshot."""
    steps: int
    """Steps shown in the snapshot: the complete ones and any abandoned step among them."""
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
    request_tokens: int | None = None
    """Estimated prompt tokens of the whole review request, once it was built
    (:func:`~foureyes.review.request.estimate_tokens`)."""
    token_budget: int | None = None
    """The reviewer route's ``max_request_tokens``, when it has one."""
    task_only: bool = False
    """Whether this is the task view: the user's messages only, every step hidden whole."""

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
    mutating_tools: Collection[str] = DEFAULT_MUTATING_TOOLS,
    task_only: bool = False,
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
        mutating_tools: the tool names ``since-last-mutation`` treats as changing state
            (``review.mutating_tools``), compared case-folded.
        task_only: the task view: the user's messages only, none of the agent's steps
            (``all-turns`` only; the mask is recorded but has nothing left to hide).

    Raises:
        ValueError: ``task_only`` with a window other than ``all-turns``.
    """
    if task_only and window.kind != "all-turns":
        raise ValueError(f"the task view covers the whole session (all-turns), not {window}")
    requested = window.k
    empty = ProjectionMeta(str(window), mask, requested, None, 0, 0, 0, 0, 0, task_only=task_only)
    if not session.events:
        return ProjectionSkipped(SkipReason.EMPTY_SESSION, empty)
    if task_only:
        return _task_view(session, empty, max_snapshot_chars, max_images, images)
    cut = _cut(session, window, max_k, mutating_tools)
    if isinstance(cut, SkipReason):
        return ProjectionSkipped(cut, replace(empty, effective_k=0))
    cut = _balanced_cut(session, cut)
    in_flight = session.in_flight()
    shown = [s for s in session.steps() if s.start >= cut and (in_flight is None or s != in_flight)]
    effective = sum(1 for s in shown if s.completed)
    if effective == 0:
        return ProjectionSkipped(SkipReason.NO_STEPS, replace(empty, effective_k=0))
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
    too_big = _over_limits(meta, max_snapshot_chars, max_images, images)
    if too_big is not None:
        return ProjectionSkipped(too_big, meta)
    message = ChatMessage(role="user", content=tuple(snapshot.parts))
    return Projection(prefix.messages, message, meta)


def _over_limits(
    meta: ProjectionMeta, max_snapshot_chars: int, max_images: int, images: bool | None
) -> SkipReason | None:
    """Why a projection of ``meta``'s size may not be sent, or ``None`` when it may."""
    if meta.images and images is not True:
        # Images only to a route known to take them: neither sent blind nor replaced by
        # placeholders the reviewer would judge without seeing.
        return SkipReason.IMAGES_UNSUPPORTED if images is False else SkipReason.IMAGES_UNKNOWN
    if meta.chars > max_snapshot_chars:
        return SkipReason.OVER_CHARS
    if meta.images > max_images:
        return SkipReason.OVER_IMAGES
    return None


_TASK_HEADER = (
    f"{DATA_RULE}\n\nThe task as the user stated it follows: the session's user messages, "
    "turn by turn.\n"
)


def _task_view(
    session: Session,
    empty: ProjectionMeta,
    max_snapshot_chars: int,
    max_images: int,
    images: bool | None,
) -> Projection | ProjectionSkipped:
    """The task view (see the module doc): the user's own messages, no step of the agent's."""
    in_flight = session.in_flight()
    parts: list[TextPart | ImagePart] = []
    buffer = [_TASK_HEADER]
    turns: set[str] = set()
    told = reasoning = chars = image_count = 0

    def flush() -> None:
        nonlocal chars
        if buffer:
            text = "".join(buffer)
            buffer.clear()
            chars += len(text)
            parts.append(TextPart(text=text))

    for index, event in enumerate(session.events):
        step = session.step_at(index)
        if step is not None and step == in_flight:
            continue
        if isinstance(event, AssistantMessage):
            reasoning += sum(1 for b in event.blocks if b.type == "reasoning")
        elif isinstance(event, ToolResult):
            reasoning += len(event.reasoning)
        if step is not None or not isinstance(event, UserMessage):
            continue
        if event.source is not MessageSource.USER:
            continue
        turn = session.turn_at(index)
        if turn.turn_id not in turns:
            turns.add(turn.turn_id)
            buffer.append(f"\n## Turn {turn.ordinal}\n")
        told += 1
        buffer.append(data_block("user_message", event.content, source=event.source.value))
        buffer.append("\n")
        for image in event.images:
            image_count += 1
            buffer.append("Image, attached to the user message above:\n")
            flush()
            parts.append(ImagePart(url=image.ref))
    flush()
    complete = sum(1 for s in session.steps() if s.completed)
    meta = replace(empty, effective_k=complete, omitted_reasoning_blocks=reasoning)
    if not told:
        return ProjectionSkipped(SkipReason.NO_TASK, meta)
    meta = replace(meta, turns=len(turns), chars=chars, images=image_count)
    too_big = _over_limits(meta, max_snapshot_chars, max_images, images)
    if too_big is not None:
        return ProjectionSkipped(too_big, meta)
    return Projection((), ChatMessage(role="user", content=tuple(parts)), meta)


def _cut(
    session: Session, window: Window, max_k: int, mutating_tools: Collection[str]
) -> int | SkipReason:
    """The index of the first event the window masks: a step start or a turn start."""
    if window.kind == "recent":
        assert window.k is not None
        completed = [s for s in session.steps() if s.completed]
        k = min(window.k, len(completed), max_k)
        return _step_cut(session, completed[-k]) if k else SkipReason.NO_STEPS
    if window.kind == "since-last-mutation":
        return _last_mutation(session, {name.casefold() for name in mutating_tools})
    if window.kind == "all-turns":
        return 0  # the first event of a session is always a turn start
    open_turns = session.open_turns()
    if not open_turns:
        return SkipReason.NO_OPEN_TURN
    if len(open_turns) > 1:
        return SkipReason.SEVERAL_OPEN_TURNS
    return open_turns[0].start


def _last_mutation(session: Session, mutating: set[str]) -> int | SkipReason:
    """The start of the last step, not in flight, that called a mutating tool."""
    in_flight = session.in_flight()
    for index in range(len(session.events) - 1, -1, -1):
        event = session.events[index]
        if isinstance(event, AssistantMessage):
            names = [b.name for b in event.blocks if b.type == "tool_call"]
        elif isinstance(event, ToolCall):
            names = [event.name]
        else:
            continue
        step = session.step_at(index)
        if step is None or step == in_flight:
            continue
        if any(name.casefold() in mutating for name in names):
            return _step_cut(session, step)
    return SkipReason.NO_MUTATION


def _balanced_cut(session: Session, cut: int) -> int:
    """``cut``, moved back over incomplete steps while the prefix before it is unbalanced.

    An abandoned step's call may have no result; masking that step too keeps the prefix
    replayable without masking one more complete step. A complete step is never added:
    an unbalanced prefix that only a complete step could fix stays a skip.
    """
    rendering = native_rendering(session)
    steps = session.steps()
    while not rendering.prefix(cut).balanced:
        before = bisect.bisect_left(steps, cut, key=lambda s: s.start) - 1
        if before < 0 or steps[before].completed:
            break
        cut = _step_cut(session, steps[before])
    return cut


def _step_cut(session: Session, step: Step) -> int:
    """The cut before ``step``: its turn's start when it is the turn's first step."""
    turn = session.turn_at(step.start)
    return turn.start if turn.steps[0] == step else step.start


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
