"""The session model: an append-only event log of one agent session.

A session is a flat sequence of events. Turns and steps are spans of it, opened and
closed by marker events:

- a **turn** runs from :class:`TurnStart` to :class:`TurnEnd` (which names an
  :class:`EndReason`); a turn without an end is *open*;
- a **step** is one model call plus every tool execution it requested (parallel calls
  stay in one step); it runs from :class:`StepStart` to :class:`StepEnd`. The step still
  running at the end of the log is *in flight*; a step that never got its end but is
  followed by other steps, or whose turn ended, is *abandoned*.

The content events are :class:`UserMessage` (with its :class:`MessageSource`),
:class:`AssistantMessage` (text, reasoning, image and tool-call blocks, as one model
call returned them), :class:`ToolCall` (a call the host executed that the model did not
request as a structured block, e.g. an action parsed from text) and :class:`ToolResult`.

:class:`Session` checks structure as it is built and raises :class:`SessionFormatError`
for what cannot be given a meaning (a step end for a step that is not running, an
assistant message outside a step, an event outside every turn, a reused id). What
happens in real logs is kept as it happened: tool calls without results, results
without calls, steps without ends and several open turns are recorded, and the
projection decides what they mean for a review. Nothing ever rewrites an event: a
session is a frozen value, and :meth:`Session.append` returns a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import UsageError
from foureyes.review._events import (
    AssistantBlock,
    AssistantMessage,
    EndReason,
    Event,
    FormatProblem,
    ImageBlock,
    MessageSource,
    ReasoningBlock,
    SessionFormatError,
    StepEnd,
    StepStart,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

__all__ = [
    "AssistantBlock",
    "AssistantMessage",
    "EndReason",
    "Event",
    "FormatProblem",
    "ImageBlock",
    "MessageSource",
    "NATIVE_FORMAT",
    "NATIVE_VERSION",
    "ReasoningBlock",
    "Session",
    "SessionFormatError",
    "Step",
    "StepEnd",
    "StepStart",
    "TextBlock",
    "ToolCall",
    "ToolCallBlock",
    "ToolResult",
    "Turn",
    "TurnEnd",
    "TurnStart",
    "UserMessage",
]

T = TypeVar("T")

NATIVE_FORMAT = "foureyes-session"
"""The ``format`` value of the header line of the native JSONL serialisation."""
NATIVE_VERSION = 1
"""The version of the native serialisation this module writes and reads."""


@dataclass(frozen=True, slots=True)
class Step:
    """Where one step lies in the event log."""

    step_id: str
    """The step's id."""
    turn_id: str
    """The turn it belongs to."""
    start: int
    """Index of its :class:`StepStart`."""
    end: int | None
    """Index of its :class:`StepEnd`; ``None`` when it never ended."""

    @property
    def completed(self) -> bool:
        """Whether the step reached its end."""
        return self.end is not None


@dataclass(frozen=True, slots=True)
class Turn:
    """Where one turn lies in the event log."""

    turn_id: str
    """The turn's id."""
    ordinal: int
    """1-based position of the turn in the session."""
    start: int
    """Index of its :class:`TurnStart`."""
    end: int | None
    """Index of its :class:`TurnEnd`; ``None`` while the turn is open."""
    reason: EndReason | None
    """Why it ended; ``None`` while open."""
    steps: tuple[Step, ...]
    """Its steps, in order."""

    @property
    def open(self) -> bool:
        """Whether the turn has not ended."""
        return self.end is None


@dataclass
class _TurnAcc:
    turn_id: str
    start: int
    end: int | None = None
    reason: EndReason | None = None
    steps: list[int] = field(default_factory=list)


@dataclass
class _StepAcc:
    step_id: str
    turn: int
    start: int
    end: int | None = None


class _Structure:
    """One pass over the events: spans of turns and steps, and who owns each event."""

    def __init__(self, events: tuple[Event, ...]) -> None:
        self.turns: list[_TurnAcc] = []
        self.steps: list[_StepAcc] = []
        self.turn_of: list[int] = []
        self.step_of: list[int] = []
        self._turn_ids: dict[str, int] = {}
        self._step_ids: set[str] = set()
        self._open: list[int] = []
        self.current: int | None = None
        self._frozen: tuple[tuple[Turn, ...], tuple[Step, ...]] | None = None
        for index, event in enumerate(events):
            turn, step = self._feed(index, event)
            self.turn_of.append(turn)
            self.step_of.append(step)

    def frozen(self) -> tuple[tuple[Turn, ...], tuple[Step, ...]]:
        """The turns and steps as values, built on first use (the session never changes)."""
        if self._frozen is None:
            steps = tuple(
                Step(s.step_id, self.turns[s.turn].turn_id, s.start, s.end) for s in self.steps
            )
            turns = tuple(
                Turn(t.turn_id, n, t.start, t.end, t.reason, tuple(steps[s] for s in t.steps))
                for n, t in enumerate(self.turns, start=1)
            )
            self._frozen = (turns, steps)
        return self._frozen

    def _fail(self, index: int, detail: str) -> SessionFormatError:
        return SessionFormatError(
            "session", FormatProblem.BROKEN_STRUCTURE, f"event {index}: {detail}"
        )

    def _feed(self, index: int, event: Event) -> tuple[int, int]:
        if isinstance(event, TurnStart):
            if event.turn_id in self._turn_ids:
                raise self._fail(index, f"turn id {event.turn_id!r} is used twice")
            # A new turn leaves a step of an older turn without its end (abandoned).
            self.current = None
            self._turn_ids[event.turn_id] = len(self.turns)
            self._open.append(len(self.turns))
            self.turns.append(_TurnAcc(event.turn_id, index))
            return len(self.turns) - 1, -1
        if isinstance(event, TurnEnd):
            turn = self._turn_ids.get(event.turn_id)
            if turn is None or turn not in self._open:
                raise self._fail(index, f"turn end for {event.turn_id!r}, which is not open")
            self._open.remove(turn)
            self.turns[turn].end, self.turns[turn].reason = index, event.reason
            if self.current is not None and self.steps[self.current].turn == turn:
                self.current = None
            return turn, -1
        if isinstance(event, StepStart):
            if event.step_id in self._step_ids:
                raise self._fail(index, f"step id {event.step_id!r} is used twice")
            turn = self._turn_ids.get(event.turn_id)
            if turn is None or turn not in self._open:
                raise self._fail(index, f"step in turn {event.turn_id!r}, which is not open")
            self._step_ids.add(event.step_id)
            self.current = len(self.steps)
            self.steps.append(_StepAcc(event.step_id, turn, index))
            self.turns[turn].steps.append(self.current)
            return turn, self.current
        if isinstance(event, StepEnd):
            if self.current is None or self.steps[self.current].step_id != event.step_id:
                raise self._fail(index, f"step end for {event.step_id!r}, which is not running")
            step, self.current = self.current, None
            self.steps[step].end = index
            return self.steps[step].turn, step
        if not isinstance(event, UserMessage | AssistantMessage | ToolCall | ToolResult):
            raise UsageError(f"event {index} is a {type(event).__name__}, not a session event")
        if self.current is not None:
            return self.steps[self.current].turn, self.current
        if isinstance(event, AssistantMessage | ToolCall):
            raise self._fail(index, f"{event.type} outside a step (one step = one model call)")
        if not self._open:
            raise self._fail(index, f"{event.type} outside every turn")
        return self._open[-1], -1


@dataclass(frozen=True, eq=False)
class Session:
    """An agent session: its events, and the system prompt and tools its model had.

    Build one from events (``Session(events=(...))``), with :meth:`append` or
    :meth:`extend`, or with an importer (:func:`foureyes.review.importers.load_session`).
    Construction checks the structure in one pass and raises :class:`SessionFormatError`
    when:

    - a turn or step id is used twice;
    - a :class:`TurnEnd` names a turn that is not open;
    - a :class:`StepStart` names a turn that is not open;
    - a :class:`StepEnd` names a step that is not the running one;
    - an :class:`AssistantMessage` or :class:`ToolCall` comes outside a step;
    - any other content event comes outside every turn.

    Anything in ``events`` that is not an event is a
    :class:`~foureyes.core.errors.UsageError` (a bug in the caller, not bad input).

    Content events inside a running step belong to it; otherwise they belong to the most
    recently started open turn. Two sessions are equal when their events, system
    messages and tools are (:meth:`digest` names one exactly).
    """

    events: tuple[Event, ...] = ()
    """The log, oldest first. Never rewritten."""
    system: tuple[str, ...] = ()
    """The primary model's system messages, in order."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """The primary model's tool definitions (OpenAI ``tools`` entries), read-only."""
    _structure: _Structure = field(init=False, repr=False)
    _memo: dict[Hashable, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        object.__setattr__(self, "system", tuple(self.system))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "_structure", _Structure(self.events))
        object.__setattr__(self, "_memo", {})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Session):
            return NotImplemented
        return (
            self.system == other.system
            and self.events == other.events
            and [canonical_json(t) for t in self.tools] == [canonical_json(t) for t in other.tools]
        )

    def append(self, event: Event) -> Session:
        """A new session with ``event`` added at the end; this one is unchanged.

        Raises:
            SessionFormatError: ``event`` breaks the structure rules.
        """
        return Session(events=(*self.events, event), system=self.system, tools=self.tools)

    def extend(self, events: Iterable[Event]) -> Session:
        """A new session with ``events`` added at the end (one check for all of them).

        Raises:
            SessionFormatError: the events break the structure rules.
        """
        return Session(events=(*self.events, *events), system=self.system, tools=self.tools)

    def memo(self, key: Hashable, compute: Callable[[Session], T]) -> T:
        """``compute(self)``, computed once per ``key`` and kept with the session.

        For values derived from the session alone (its native rendering, say): the session
        never changes, so neither do they. Nothing in the session itself is touched.
        """
        if key not in self._memo:
            self._memo[key] = compute(self)
        value: T = self._memo[key]
        return value

    def turns(self) -> tuple[Turn, ...]:
        """Every turn, in the order they started."""
        return self._structure.frozen()[0]

    def steps(self) -> tuple[Step, ...]:
        """Every step, in the order they started."""
        return self._structure.frozen()[1]

    def open_turns(self) -> tuple[Turn, ...]:
        """The turns that have not ended, in the order they started."""
        return tuple(t for t in self.turns() if t.open)

    def in_flight(self) -> Step | None:
        """The step still running at the end of the log, if any."""
        current = self._structure.current
        return None if current is None else self.steps()[current]

    def turn_at(self, index: int) -> Turn:
        """The turn event ``index`` belongs to (every event belongs to one)."""
        return self.turns()[self._structure.turn_of[index]]

    def step_at(self, index: int) -> Step | None:
        """The step event ``index`` belongs to, or ``None`` when it is outside every step."""
        step = self._structure.step_of[index]
        return None if step < 0 else self.steps()[step]

    def lines(self) -> Iterator[str]:
        """The native JSONL serialisation, line by line (no line breaks).

        The first line is the header ``{"format": "foureyes-session", "version": 1,
        "system": [...], "tools": [...]}``; each further line is one event. Every line is
        canonical JSON (sorted keys, no spaces, UTF-8), so equal sessions serialise to equal
        bytes and :func:`foureyes.review.importers.native.loads` reads them back equal.
        """
        header = {
            "format": NATIVE_FORMAT,
            "system": list(self.system),
            "tools": list(self.tools),
            "version": NATIVE_VERSION,
        }
        yield canonical_json(header).decode("utf-8")
        for event in self.events:
            yield canonical_json(event.model_dump(mode="json")).decode("utf-8")

    def to_jsonl(self) -> str:
        """The native JSONL serialisation (see :meth:`lines`), one line each."""
        return "".join(line + "\n" for line in self.lines())

    def digest(self) -> str:
        """SHA-256 of :meth:`to_jsonl`: names this exact session."""
        return sha256_hex(self.to_jsonl())
