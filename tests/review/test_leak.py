"""The leak test (docs/design.md 4, invariant 9) on the real trajectories, over the real simulator.

A unique canary is placed in every reasoning block of every real trajectory (SWE-agent
``.traj``, OpenHands JSON, DeepSeek cassettes), in the raw file, wherever the reasoning
text occurs in the model's own records (SWE-agent repeats its thought in the message
content; OpenHands in the model response). Each session is then reviewed with every mask
that hides reasoning, in several windows and both request modes, with ``foureyes
simulate`` as the reviewer. In the request log of the simulator:

- no canary of a masked reasoning block (every block from the projection's cut on)
  appears anywhere in any request;
- a canary from before the cut, where the native prefix keeps reasoning as the API's
  pass-back rules require, appears only as that prefix message's ``reasoning_content``;
- every tool result of the session appears.

The control (mask ``none``) shows that the canaries are live: there, they do appear.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from foureyes.config import ReviewConfig
from foureyes.llm.prompting import neutralise
from foureyes.review.importers import load_session, parse_session
from foureyes.review.projection import Mask, Projection, Window
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, project_session
from foureyes.review.runner import ReviewRunner
from foureyes.review.session import (
    AssistantMessage,
    ReasoningBlock,
    Session,
    ToolResult,
    TurnEnd,
)
from tests.helpers.data import require_data
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import (
    CASSETTES,
    SESSION_FILES,
    cassette_bodies,
    open_caller,
    packet,
    scenario,
    sim_config,
)

CONFIG = ReviewConfig(max_snapshot_chars=1_000_000)


class Canaries:
    """Hands out unique canary strings."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"CANARY{self.count:04d}QZX"


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    return value


def _mark(record: dict[str, Any], thought: Any, canary: Canaries) -> dict[str, Any]:
    """``record`` with its thought, wherever the record repeats it, prefixed by a canary."""
    if not isinstance(thought, str) or not thought.strip():
        return record
    return _replace(record, thought, f"{canary()} {thought}")


def marked_swe_agent(data: dict[str, Any], canary: Canaries) -> dict[str, Any]:
    history = [
        _mark(m, m.get("thought"), canary) if m.get("role") == "assistant" else m
        for m in data["history"]
    ]
    trajectory = [_mark(step, step.get("thought"), canary) for step in data["trajectory"]]
    return {**data, "history": history, "trajectory": trajectory}


def marked_openhands(events: list[dict[str, Any]], canary: Canaries) -> list[dict[str, Any]]:
    marked = []
    for event in events:
        args = event.get("args") or {}
        if event.get("source") == "agent" and "action" in event:
            event = _mark(event, args.get("thought"), canary)
            metadata = event.get("tool_call_metadata") or {}
            choices = (metadata.get("model_response") or {}).get("choices") or [{}]
            event = _mark(event, choices[0].get("message", {}).get("reasoning_content"), canary)
        marked.append(event)
    return marked


def marked_chat(body: dict[str, Any], canary: Canaries) -> dict[str, Any]:
    messages = [
        {**m, "reasoning_content": f"{canary()} {m['reasoning_content']}"}
        if m.get("role") == "assistant" and m.get("reasoning_content") is not None
        else m
        for m in body["messages"]
    ]
    return {**body, "messages": messages}


def reasoning_texts(session: Session) -> Iterator[tuple[int, str]]:
    """Every reasoning block of the session, with the index of its event."""
    for index, event in enumerate(session.events):
        if isinstance(event, AssistantMessage):
            for block in event.blocks:
                if isinstance(block, ReasoningBlock):
                    yield index, block.text
        if isinstance(event, ToolResult):
            for nested in event.reasoning:
                yield index, nested.text


def in_progress(session: Session) -> Session | None:
    """The session as it stood before its last turn ended (so ``current-turn`` applies)."""
    if not session.events or not isinstance(session.events[-1], TurnEnd):
        return None
    return Session(events=session.events[:-1], system=session.system, tools=session.tools)


def marked_sessions() -> dict[str, Session]:
    canary = Canaries()
    sessions: dict[str, Session] = {}
    for path in SESSION_FILES:
        raw = json.loads(require_data(path).read_text(encoding="utf-8"))
        if path.suffix == ".traj":
            marked, fmt = marked_swe_agent(raw, canary), "swe-agent"
        else:
            marked, fmt = marked_openhands(raw, canary), "openhands"
        sessions[path.name] = parse_session(json.dumps(marked), fmt)
        # Marking changes texts only: the session has the original's shape.
        original = load_session(path)
        assert [e.type for e in sessions[path.name].events] == [e.type for e in original.events]
    for path in CASSETTES:
        for variant, body in cassette_bodies(path).items():
            marked_body = marked_chat(body, canary)
            sessions[f"{path.stem}:{variant}"] = parse_session(
                json.dumps(marked_body), "openai-chat"
            )
    for name, session in list(sessions.items()):
        live = in_progress(session)
        if live is not None:
            sessions[f"{name}:in-progress"] = live
    return sessions


SESSIONS = marked_sessions()


CANARY = re.compile(r"CANARY\d{4}QZX")


def canaries_of(text: str) -> set[str]:
    return set(CANARY.findall(text))


def test_every_reasoning_block_of_the_real_trajectories_has_a_canary() -> None:
    blocks = [(name, text) for name, s in SESSIONS.items() for _, text in reasoning_texts(s)]
    assert len(blocks) >= 30  # the real files hold dozens of reasoning blocks
    for name, text in blocks:
        # A blank block carries nothing that could leak; every other one is marked.
        assert canaries_of(text) or not text.strip(), f"a reasoning block of {name} is unmarked"


WINDOWS = [Window.recent(1), Window.recent(3), Window.current_turn()]


def _texts(message: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Every string a wire message carries, with where it sits."""
    content = message.get("content")
    if isinstance(content, str):
        yield "content", content
    elif isinstance(content, list):
        for part in content:
            yield "content", part.get("text") or part["image_url"]["url"]
    if message.get("reasoning_content"):
        yield "reasoning_content", message["reasoning_content"]
    for call in message.get("tool_calls") or []:
        yield "tool_calls", json.dumps(call, ensure_ascii=False)


@pytest.mark.parametrize("mask", [Mask.REASONING_ONLY, Mask.ACTION_ONLY])
async def test_masked_reasoning_never_reaches_the_reviewer(
    simulator: RunningSimulator, mask: Mask
) -> None:
    simulator.load(scenario({"content": packet("checked")}))
    expected: list[tuple[str, Projection, Session]] = []
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = Reviewer(ReviewRunner(caller, packet_max_chars=10_000), CONFIG)
        for name, session in SESSIONS.items():
            for window in WINDOWS:
                projection = project_session(session, window, mask, CONFIG)
                if not isinstance(projection, Projection):
                    continue
                for mode in RequestMode:
                    review = await reviewer.review(session, window=window, mask=mask, mode=mode)
                    assert review.accepted, (name, window, mode)
                    expected.append((name, projection, session))
    sent = simulator.requests()
    assert len(sent) == len(expected) >= 40
    for entry, (name, projection, session) in zip(sent, expected, strict=True):
        whole = json.dumps(entry, ensure_ascii=False)
        cut = projection.meta.cut or 0
        masked = {c for index, text in reasoning_texts(session) if index >= cut
                  for c in canaries_of(text)}  # fmt: skip
        leaked = masked & canaries_of(whole)
        assert not leaked, f"{name}: masked reasoning reached the reviewer: {sorted(leaked)}"
        for message in entry["messages"]:
            for where, text in _texts(message):
                if where != "reasoning_content":
                    assert not canaries_of(text), f"{name}: reasoning outside the prefix"
        shown = "\n".join(text for m in entry["messages"] for _, text in _texts(m))
        for event in session.events:
            if isinstance(event, ToolResult) and event.content.strip():
                assert event.content in shown or neutralise(event.content) in shown, (
                    f"{name}: a tool result is missing from the masked request"
                )


async def test_the_control_shows_the_canaries(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": packet("checked")}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = Reviewer(ReviewRunner(caller, packet_max_chars=10_000), CONFIG)
        for name in ("pydicom__pydicom-1458.traj", "basic.json"):
            review = await reviewer.review(SESSIONS[name], window=Window.recent(3), mask=Mask.NONE)
            assert review.accepted
    shown = [canaries_of(json.dumps(e)) for e in simulator.requests()]
    assert all(len(found) >= 2 for found in shown)


def test_sessions_cover_every_real_trajectory() -> None:
    names = set(SESSIONS)
    assert {p.name for p in SESSION_FILES} <= names
    assert {f"{p.stem}:done" for p in CASSETTES} <= names
    assert any(name.endswith(":in-progress") for name in names)
