"""What every importer shares: a session builder that numbers turns and steps, and shape checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from foureyes.core.digest import canonical_json
from foureyes.review.session import (
    AssistantMessage,
    EndReason,
    Event,
    FormatProblem,
    Session,
    SessionFormatError,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
)

__all__ = ["SessionBuilder", "raw_arguments", "shape_error", "text_of"]


def shape_error(format_name: str, where: str, detail: str) -> SessionFormatError:
    """The error for JSON that is not shaped like ``format_name`` at ``where``."""
    return SessionFormatError(format_name, FormatProblem.WRONG_SHAPE, f"{where}: {detail}")


def text_of(value: Any, format_name: str, where: str) -> str:
    """A string field, or the error that says it is not one."""
    if not isinstance(value, str):
        raise shape_error(format_name, where, f"expected a string, got {type(value).__name__}")
    return value


def raw_arguments(value: Any, format_name: str, where: str) -> str:
    """Tool arguments as raw text: kept as written, or canonical JSON when given as an object."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | Sequence):
        return canonical_json(value).decode("utf-8")
    raise shape_error(format_name, where, f"arguments must be text or JSON, got {value!r:.40}")


class SessionBuilder:
    """Appends events in order, numbering turns ``t1, t2, ...`` and steps ``s1, s2, ...``.

    It tracks the calls of the running step that still wait for a result, so an importer
    can tell a finished step from one still in flight at the end of its input.
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.turn: str | None = None
        self.step: str | None = None
        self.waiting: set[str] = set()
        self._turns = self._steps = 0

    def add(self, event: Event) -> None:
        """Append a content event (opening a turn first when none is open)."""
        if self.turn is None:
            self.open_turn()
        if isinstance(event, AssistantMessage):
            self.waiting.update(b.call_id for b in event.blocks if b.type == "tool_call")
        elif isinstance(event, ToolCall):
            self.waiting.add(event.call_id)
        elif isinstance(event, ToolResult):
            self.waiting.discard(event.call_id)
        self.events.append(event)

    def open_turn(self) -> None:
        """Start a new turn."""
        self._turns += 1
        self.turn = f"t{self._turns}"
        self.events.append(TurnStart(turn_id=self.turn))

    def end_turn(self, reason: EndReason) -> None:
        """End the open turn (ending its step first), if one is open."""
        self.end_step()
        if self.turn is not None:
            self.events.append(TurnEnd(turn_id=self.turn, reason=reason))
            self.turn = None

    def start_step(self) -> None:
        """End the running step, if any, and start a new one in the open turn."""
        self.end_step()
        if self.turn is None:
            self.open_turn()
        assert self.turn is not None
        self._steps += 1
        self.step = f"s{self._steps}"
        self.waiting = set()
        self.events.append(StepStart(step_id=self.step, turn_id=self.turn))

    def end_step(self) -> None:
        """End the running step, if any."""
        if self.step is not None:
            self.events.append(StepEnd(step_id=self.step))
            self.step = None

    def finish(
        self, *, system: Sequence[str] = (), tools: Sequence[Mapping[str, Any]] = ()
    ) -> Session:
        """The session built so far.

        A last step whose calls all have results ends; one still waiting for a result
        stays in flight, and so does its turn.
        """
        if self.step is not None and not self.waiting:
            self.end_step()
        return Session(events=tuple(self.events), system=tuple(system), tools=tuple(tools))
