"""The snapshot: the suffix of a session after the cut as one flat, labelled transcript."""

from __future__ import annotations

from foureyes.llm.prompting import DATA_RULE, data_block, neutralise
from foureyes.llm.provider import ImagePart, TextPart
from foureyes.review._events import AssistantMessage, Event, ToolCall, ToolResult, UserMessage
from foureyes.review.session import Session, Step, Turn

__all__ = ["Snapshot"]


def _attr(value: str) -> str:
    # data_block attributes may hold no quotes or line breaks; escaping keeps ids distinct.
    return (
        value.replace("\\", "\\\\").replace('"', "\\x22").replace("\r", "\\r").replace("\n", "\\n")
    )


class Snapshot:
    """The suffix from the cut on as one flat transcript (see :mod:`foureyes.review.projection`).

    Attributes: ``parts`` (the text and image blocks), ``chars``, ``images``, ``omitted``
    (reasoning blocks the mask dropped), ``steps`` and ``turns`` (ids of turns shown).
    """

    def __init__(self, session: Session, cut: int, *, reasoning: bool, text: bool) -> None:
        self.session = session
        self.show_reasoning, self.show_text = reasoning, text
        self.parts: list[TextPart | ImagePart] = []
        self._buffer: list[str] = []
        self.chars = self.images = self.omitted = self.steps = 0
        self.turns: set[str] = set()
        self._turn_cache: dict[str, tuple[Turn, dict[int, int]]] = {}
        self._batch: list[tuple[tuple[int, int], str, str, str]] = []
        self._stray: list[ToolResult] = []
        events = session.events
        in_flight = session.in_flight()
        stop = len(events) if in_flight is None else in_flight.start
        self._results, self._orphans = _join(events, cut, stop)
        self._text(DATA_RULE + "\n\nThe session continues below, turn by turn and step by step.\n")
        block_ids: set[str] = set()
        if cut < stop and events[cut].type != "turn_start":
            # The cut falls inside a turn: its user message and earlier steps are above.
            turn, _ = self._turn(cut)
            self._text(f"\n## Turn {turn.ordinal}, continued (its earlier messages are above)\n")
        for index in range(cut, stop):
            event = events[index]
            if isinstance(event, ToolCall):
                if event.call_id not in block_ids:
                    self._batch.append(((index, -1), event.call_id, event.name, event.arguments))
                continue
            if isinstance(event, ToolResult):
                if index in self._orphans:
                    self._stray.append(event)
                continue
            # Anything else closes the open batch: its calls were made before it.
            self._close_batch()
            if event.type == "turn_start":
                turn, _ = self._turn(index)
                self._text(f"\n## Turn {turn.ordinal}\n")
            elif event.type == "turn_end":
                turn, _ = self._turn(index)
                self._text(f"Turn {turn.ordinal} ended: {event.reason}.\n")
            elif event.type == "step_start":
                block_ids = set()
                self._step(index)
            elif isinstance(event, UserMessage):
                self._text(data_block("user_message", event.content, source=event.source.value))
                self._text("\n")
                for image in event.images:
                    self._image(image.ref, "attached to the user message above")
            elif isinstance(event, AssistantMessage):
                block_ids = {b.call_id for b in event.blocks if b.type == "tool_call"}
                self._assistant(index, event)
        self._close_batch()
        self._flush()

    def _turn(self, index: int) -> tuple[Turn, dict[int, int]]:
        turn = self.session.turn_at(index)
        cached = self._turn_cache.get(turn.turn_id)
        if cached is None:
            ordinals = {s.start: n for n, s in enumerate(turn.steps, start=1)}
            cached = self._turn_cache[turn.turn_id] = (turn, ordinals)
        self.turns.add(turn.turn_id)
        return cached

    def _step(self, index: int) -> None:
        turn, ordinals = self._turn(index)
        step: Step | None = self.session.step_at(index)
        self.steps += 1
        note = "" if step is not None and step.completed else " (no end of this step was recorded)"
        self._text(f"\n### Turn {turn.ordinal}, step {ordinals[index]}{note}\n")

    def _assistant(self, index: int, event: AssistantMessage) -> None:
        for n, block in enumerate(event.blocks):
            if block.type == "reasoning":
                if self.show_reasoning:
                    self._text(data_block("reasoning", block.text) + "\n")
                else:
                    self.omitted += 1
            elif block.type == "text":
                if self.show_text:
                    self._text(data_block("assistant_text", block.text) + "\n")
            elif block.type == "image":
                if self.show_text:
                    self._image(block.ref, "written by the assistant")
            else:
                self._batch.append(((index, n), block.call_id, block.name, block.arguments))

    def _close_batch(self) -> None:
        """Render the open batch: every call of one model response, then their outcomes.

        The calls of one response were issued together, so they are listed together
        before any outcome (never as a sequence of action, outcome, action, outcome);
        each outcome names the call it answers. Results that answer no call, met while
        the batch was open, follow it.
        """
        batch, self._batch = self._batch, []
        if batch:
            count = f"{len(batch)} call" + ("" if len(batch) == 1 else "s")
            self._text(f"Action batch ({count}, issued together in one model response):\n")
            for _, call_id, name, arguments in batch:
                block = data_block("tool_call", arguments, call_id=_attr(call_id), tool=_attr(name))
                self._text(block + "\n")
            self._text("Outcomes of the batch, by call id:\n")
            for key, call_id, _, _ in batch:
                result = self._results.get(key)
                label = f'Outcome of call_id="{neutralise(_attr(call_id))}"'
                if result is None:
                    self._text(f"{label}: no result was recorded for this call.\n")
                else:
                    self._text(f"{label}:\n")
                    self._outcome(result)
        stray, self._stray = self._stray, []
        for result in stray:
            self._text("Outcome, matching no recorded action:\n")
            self._outcome(result)

    def _outcome(self, result: ToolResult) -> None:
        status = "error" if result.error else "ok"
        call_id = _attr(result.call_id)
        self._text(data_block("tool_result", result.content, call_id=call_id, status=status))
        self._text("\n")
        for reasoning in result.reasoning:
            if self.show_reasoning:
                block = data_block("tool_result_reasoning", reasoning.text, call_id=call_id)
                self._text(block + "\n")
            else:
                self.omitted += 1
        for image in result.images:
            self._image(image.ref, "returned by the tool above")

    def _image(self, ref: str, where: str) -> None:
        self.images += 1
        self._text(f"Image, {where}:\n")
        self._flush()
        self.parts.append(ImagePart(url=ref))

    def _text(self, text: str) -> None:
        self._buffer.append(text)

    def _flush(self) -> None:
        if self._buffer:
            text = "".join(self._buffer)
            self._buffer.clear()
            self.chars += len(text)
            self.parts.append(TextPart(text=text))


def _join(
    events: tuple[Event, ...], cut: int, stop: int
) -> tuple[dict[tuple[int, int], ToolResult], set[int]]:
    """Pair each result with the latest earlier unanswered call of its id (from ``cut``).

    Returns the result of each call, keyed by (event index, block index; -1 for a
    :class:`ToolCall` event), and the indices of results before ``stop`` that answer no
    call (results in the in-flight step that answer its own calls are neither).
    """
    unanswered: dict[str, list[tuple[int, int]]] = {}
    results: dict[tuple[int, int], ToolResult] = {}
    orphans: set[int] = set()
    block_ids: set[str] = set()
    for index in range(cut, len(events)):
        event = events[index]
        if event.type == "step_start":
            block_ids = set()
        elif isinstance(event, AssistantMessage):
            block_ids = set()
            for n, block in enumerate(event.blocks):
                if block.type == "tool_call":
                    block_ids.add(block.call_id)
                    unanswered.setdefault(block.call_id, []).append((index, n))
        elif isinstance(event, ToolCall) and event.call_id not in block_ids:
            unanswered.setdefault(event.call_id, []).append((index, -1))
        elif isinstance(event, ToolResult):
            waiting = unanswered.get(event.call_id)
            if waiting:
                results[waiting.pop()] = event
            elif index < stop:
                orphans.add(index)
    return results, orphans
