"""Sessions for the review tests: the real trajectories, a small builder and random sessions.

The real files are read in place from the third-party data (tests/helpers/data.py: a
missing file skips the test, or fails it in CI; never copied). The DeepSeek and
OpenAI cassettes become chat sessions: the last recorded request's messages plus the
response message, with the request's tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from foureyes.review.importers import SessionFormat, load_session, parse_session
from foureyes.review.session import (
    AssistantBlock,
    AssistantMessage,
    EndReason,
    Event,
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
from tests.helpers.data import DATA_DIR, require_data
from tests.helpers.simulator import read_cassette

TRAJECTORIES = DATA_DIR / "trajectories"
TRAJECTORY_FILES: dict[str, tuple[Path, SessionFormat]] = {
    "swe-agent-new": (
        TRAJECTORIES / "swe-agent" / "marshmallow-code__marshmallow-1867.traj",
        SessionFormat.SWE_AGENT,
    ),
    "swe-agent-old": (
        TRAJECTORIES / "swe-agent" / "pydicom__pydicom-1458.traj",
        SessionFormat.SWE_AGENT,
    ),
    "openhands-basic": (TRAJECTORIES / "openhands" / "basic.json", SessionFormat.OPENHANDS),
    "openhands-interactions": (
        TRAJECTORIES / "openhands" / "basic_interactions.json",
        SessionFormat.OPENHANDS,
    ),
}
"""The trajectory files, by a short name, with their format."""
CASSETTES = {
    "deepseek-tools": "test_deepseek_deferred_capability_with_thinking.yaml",
    "deepseek-thinking": "test_deepseek_model_thinking_part.yaml",
    "deepseek-stream": "test_deepseek_model_thinking_stream.yaml",
    "openai-tools": "test_multiple_agent_tool_calls.yaml",
}
"""Cassettes whose last chat-completions exchange is a session."""


def _streamed_message(sse: str) -> dict[str, Any]:
    """The assistant message an SSE stream of chat-completion chunks adds up to."""
    message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": ""}
    for line in sse.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:])["choices"]:
            for key in ("content", "reasoning_content"):
                message[key] += choice["delta"].get(key) or ""
    return message


def cassette_chat(name: str) -> dict[str, Any]:
    """The chat session of a cassette: last request's messages + the answer, and tools."""
    interactions = [
        i
        for i in read_cassette(TRAJECTORIES / "cassettes" / CASSETTES[name])
        if str(i["request"]["uri"]).endswith("/chat/completions")
    ]
    last = interactions[-1]
    body = last["request"]["parsed_body"]
    if "parsed_body" not in last["response"]:
        answer = _streamed_message(last["response"]["body"]["string"])
        return {"messages": [*body["messages"], answer], "tools": body.get("tools", [])}
    answer = dict(last["response"]["parsed_body"]["choices"][0]["message"])
    for key in ("annotations", "refusal"):
        answer.pop(key, None)
    return {"messages": [*body["messages"], answer], "tools": body.get("tools", [])}


def real_sessions() -> Iterator[tuple[str, Session]]:
    """Every real session: the trajectory files and the cassette chats."""
    for name, (path, _) in TRAJECTORY_FILES.items():
        yield name, load_session(require_data(path))
    for name in CASSETTES:
        yield name, parse_session(json.dumps(cassette_chat(name)))


REAL_NAMES = [*TRAJECTORY_FILES, *CASSETTES]
"""Names :func:`real_session` takes."""


def real_session(name: str) -> Session:
    """One real session by name."""
    if name in TRAJECTORY_FILES:
        return load_session(require_data(TRAJECTORY_FILES[name][0]))
    return parse_session(json.dumps(cassette_chat(name)))


@dataclass
class Build:
    """Builds well-formed sessions step by step: ``b.turn("hi"); b.step(...); b.end()``."""

    events: list[Event] = field(default_factory=list)
    turns: int = 0
    steps: int = 0
    turn_id: str | None = None

    def turn(self, text: str = "please help") -> Build:
        self.turns += 1
        self.turn_id = f"t{self.turns}"
        self.events += [TurnStart(turn_id=self.turn_id), UserMessage(content=text)]
        return self

    def step(
        self,
        *blocks: AssistantBlock,
        results: tuple[ToolResult, ...] = (),
        end: bool = True,
    ) -> Build:
        assert self.turn_id is not None
        self.steps += 1
        step_id = f"s{self.steps}"
        self.events += [StepStart(step_id=step_id, turn_id=self.turn_id)]
        self.events += [AssistantMessage(blocks=blocks), *results]
        if end:
            self.events.append(StepEnd(step_id=step_id))
        return self

    def tool_step(self, n: int, *, reasoning: str | None = None, end: bool = True) -> Build:
        """A step: reasoning ``R<n>``, text ``T<n>``, call ``c<n>`` and its result ``OUT<n>``."""
        return self.step(
            ReasoningBlock(text=reasoning or f"R{n}"),
            TextBlock(text=f"T{n}"),
            ToolCallBlock(call_id=f"c{n}", name="bash", arguments=f'{{"n": {n}}}'),
            results=(ToolResult(call_id=f"c{n}", content=f"OUT{n}"),),
            end=end,
        )

    def end(self, reason: EndReason = EndReason.COMPLETED) -> Build:
        assert self.turn_id is not None
        self.events.append(TurnEnd(turn_id=self.turn_id, reason=reason))
        self.turn_id = None
        return self

    def add(self, *events: Event) -> Build:
        for event in events:
            if isinstance(event, TurnStart):
                self.turn_id = event.turn_id
        self.events += events
        return self

    def session(self, **kwargs: Any) -> Session:
        return Session(events=tuple(self.events), **kwargs)


@st.composite
def canary_sessions(draw: st.DrawFn) -> Session:
    """Random well-formed sessions with a canary in every reasoning block.

    Every reasoning block (nested ones too) holds a unique
    ``CANARY<n>`` string, every tool result a unique ``RESULT<n>``, results of parallel
    calls arrive in random order, the last turn may stay open and its last step in flight.
    """
    counter = iter(range(1_000_000))
    events: list[Event] = []
    n_turns = draw(st.integers(1, 4))
    step_no = 0
    for t in range(1, n_turns + 1):
        turn_id = f"t{t}"
        events += [TurnStart(turn_id=turn_id), UserMessage(content=f"USER{next(counter)}")]
        last_turn = t == n_turns
        n_steps = draw(st.integers(0 if last_turn else 1, 3))
        in_flight = False
        for s in range(n_steps):
            step_no += 1
            step_id = f"s{step_no}"
            blocks: list[AssistantBlock] = []
            for _ in range(draw(st.integers(0, 2))):
                blocks.append(ReasoningBlock(text=f"CANARY{next(counter)} thinking"))
            if draw(st.booleans()):
                blocks.append(TextBlock(text=f"TEXT{next(counter)}"))
            calls = [f"call{next(counter)}" for _ in range(draw(st.integers(0, 3)))]
            blocks += [ToolCallBlock(call_id=c, name="bash", arguments="{}") for c in calls]
            order = draw(st.permutations(calls))
            nested = draw(st.booleans())
            results = [
                ToolResult(
                    call_id=c,
                    content=f"RESULT{next(counter)}",
                    error=draw(st.booleans()),
                    reasoning=(ReasoningBlock(text=f"CANARY{next(counter)} nested"),)
                    if nested
                    else (),
                )
                for c in order
            ]
            in_flight = last_turn and s == n_steps - 1 and draw(st.booleans())
            events += [
                StepStart(step_id=step_id, turn_id=turn_id),
                AssistantMessage(blocks=tuple(blocks)),
            ]
            events += results[: len(results) // 2] if in_flight else results
            if not in_flight:
                events.append(StepEnd(step_id=step_id))
        if not last_turn or (not in_flight and draw(st.booleans())):
            events.append(TurnEnd(turn_id=turn_id, reason=draw(st.sampled_from(EndReason))))
    return Session(events=tuple(events), system=("You are an agent.",))
