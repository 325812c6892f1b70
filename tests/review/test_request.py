from __future__ import annotations

import json
from typing import Any

import pytest

from foureyes.core.digest import canonical_json
from foureyes.core.roles import Role
from foureyes.llm.openai_compat import OpenAIProvider
from foureyes.llm.prompting import DATA_RULE
from foureyes.llm.provider import ChatMessage
from foureyes.review.importers import parse_session
from foureyes.review.projection import Mask, Projection, Window, native_messages, project
from foureyes.review.request import (
    DEFAULT_PERSONA,
    RequestMode,
    build_review_request,
    primary_messages,
    request_units,
    shared_prefix_bytes,
)
from foureyes.review.session import Session
from tests.helpers.simulator import RunningSimulator
from tests.review._session_support import REAL_NAMES, Build, cassette_chat, real_session

TOOLS = ({"type": "function", "function": {"name": "bash", "parameters": {}}},)
LIMITS: dict[str, Any] = {"max_snapshot_chars": 1_000_000, "max_images": 20}


def _session() -> Session:
    return (
        Build()
        .turn("first")
        .tool_step(1)
        .end()
        .turn("second")
        .tool_step(2)
        .tool_step(3)
        .session(system=("You are a coding agent.",), tools=TOOLS)
    )


def _projection(
    session: Session, window: str = "recent:1", mask: Mask = Mask.REASONING_ONLY
) -> Projection:
    result = project(session, Window.parse(window), mask, **LIMITS)
    assert isinstance(result, Projection)
    return result


def _bytes(messages: tuple[ChatMessage, ...], tools: tuple[object, ...]) -> int:
    """The theoretical maximum, computed independently: system, tools and native prefix."""
    units = (
        [json.dumps(list(tools), sort_keys=True, separators=(",", ":"), ensure_ascii=False)]
        if tools
        else []
    )
    units += [
        json.dumps(m.to_wire(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        for m in messages
    ]
    return sum(len(u.encode()) for u in units)


def test_cache_aligned_keeps_the_primary_system_and_tools_and_ends_with_the_instruction() -> None:
    session = _session()
    projection = _projection(session)
    review = build_review_request(
        session, projection, RequestMode.CACHE_ALIGNED, instruction="REVIEW NOW"
    )
    messages = review.request.messages
    assert messages[0] == ChatMessage.system("You are a coding agent.")
    assert messages[1 : 1 + len(projection.prefix)] == projection.prefix
    assert messages[-2] == projection.snapshot
    assert messages[-1] == ChatMessage.user("REVIEW NOW")
    assert review.request.tools == TOOLS
    assert review.request.role is Role.REVIEWER
    assert review.request.subject["review_snapshot"] == projection.snapshot.text
    assert review.request.subject["review_instruction"] == "REVIEW NOW"
    assert review.mode is RequestMode.CACHE_ALIGNED


def test_cache_aligned_share_is_the_theoretical_maximum() -> None:
    session = _session()
    projection = _projection(session)
    review = build_review_request(session, projection, RequestMode.CACHE_ALIGNED, instruction="x")
    system = (ChatMessage.system("You are a coding agent."),)
    maximum = _bytes((*system, *projection.prefix), TOOLS)
    assert review.prefix_bytes == maximum
    assert review.total_bytes == _bytes(review.request.messages, TOOLS)
    assert review.prefix_share == pytest.approx(maximum / review.total_bytes)
    assert 0 < review.prefix_share < 1


def test_the_primary_system_and_tools_can_be_given() -> None:
    session = _session()
    projection = _projection(session)
    tools = ({"type": "function", "function": {"name": "other"}},)
    review = build_review_request(
        session,
        projection,
        RequestMode.CACHE_ALIGNED,
        instruction="x",
        primary_system="Host system prompt",
        primary_tools=tools,
    )
    assert review.request.messages[0] == ChatMessage.system("Host system prompt")
    assert review.request.tools == tools
    assert review.prefix_bytes == _bytes(
        (ChatMessage.system("Host system prompt"), *projection.prefix), tools
    )


def test_reviewer_persona_has_its_own_system_prompt_with_the_data_rule_and_no_primary_tools() -> (
    None
):
    session = _session()
    projection = _projection(session)
    review = build_review_request(
        session, projection, RequestMode.REVIEWER_PERSONA, instruction="x"
    )
    system = review.request.messages[0]
    assert system.role == "system" and system.text == f"{DEFAULT_PERSONA}\n\n{DATA_RULE}"
    assert review.request.tools == ()
    assert review.request.messages[1:] == (
        *projection.prefix,
        projection.snapshot,
        ChatMessage.user("x"),
    )
    assert review.prefix_bytes == 0 and review.prefix_share == 0.0


def test_reviewer_persona_takes_its_prompt_and_read_only_tools() -> None:
    session = _session()
    read_only = ({"type": "function", "function": {"name": "read_file"}},)
    persona = f"You review. {DATA_RULE}"
    review = build_review_request(
        session,
        _projection(session),
        RequestMode.REVIEWER_PERSONA,
        instruction="x",
        persona_system=persona,
        persona_tools=read_only,
    )
    assert review.request.messages[0].text == persona  # the rule is not added twice
    assert review.request.tools == read_only


def test_the_primary_context_is_system_plus_the_native_history() -> None:
    session = _session()
    assert primary_messages(session) == (
        ChatMessage.system("You are a coding agent."),
        *native_messages(session),
    )
    assert primary_messages(session, primary_system="S")[0] == ChatMessage.system("S")


def test_units_and_shared_prefix() -> None:
    a, b = ChatMessage.user("a"), ChatMessage.user("b")
    units = request_units((a, b), TOOLS)
    assert units[0] == canonical_json(list(TOOLS))
    assert units[1:] == [canonical_json(a.to_wire()), canonical_json(b.to_wire())]
    assert request_units((a,)) == [canonical_json(a.to_wire())]
    assert shared_prefix_bytes(units, units) == sum(len(u) for u in units)
    assert shared_prefix_bytes(units, request_units((a, a), TOOLS)) == len(units[0]) + len(units[1])
    assert shared_prefix_bytes(units, []) == 0


@pytest.mark.parametrize("name", REAL_NAMES)
@pytest.mark.parametrize("window", ["recent:1", "recent:3"])
@pytest.mark.parametrize("mask", list(Mask))
def test_real_sessions_reach_the_theoretical_maximum(name: str, window: str, mask: Mask) -> None:
    session = real_session(name)
    projection = _projection(session, window, mask)
    review = build_review_request(
        session, projection, RequestMode.CACHE_ALIGNED, instruction="Review."
    )
    system = tuple(ChatMessage.system(s) for s in session.system)
    assert review.prefix_bytes == _bytes((*system, *projection.prefix), session.tools)
    assert review.request.messages[-1] == ChatMessage.user("Review.")


async def test_a_cache_aligned_request_reaches_the_endpoint_as_built(
    simulator: RunningSimulator,
) -> None:
    """Over real HTTP: the prefix arrives byte-equal to the primary's own messages."""
    chat = cassette_chat("deepseek-tools")
    chat["messages"].append({"role": "user", "content": "Roll again, please."})
    chat["messages"].append(
        {
            "role": "assistant",
            "content": "Rolling!",
            "reasoning_content": "WINDOW-REASONING",
            "tool_calls": [{"id": "r2", "function": {"name": "roll_dice", "arguments": "{}"}}],
        }
    )
    chat["messages"].append({"role": "tool", "tool_call_id": "r2", "content": "6"})
    session = parse_session(json.dumps(chat))
    projection = _projection(session, "recent:1", Mask.REASONING_ONLY)
    review = build_review_request(
        session, projection, RequestMode.CACHE_ALIGNED, instruction="Review."
    )
    simulator.load({"models": {"sim-reviewer": [{"content": "{}"}]}})
    provider = OpenAIProvider("reviewer", simulator.route("sim-reviewer"), api_key="unused")
    try:
        await provider.complete(review.request, timeout_s=5)
    finally:
        await provider.aclose()
    (sent,) = simulator.requests()
    primary = [m.to_wire() for m in primary_messages(session)]
    shared = 2 + len(projection.prefix)  # the two system messages and the native prefix
    assert sent["messages"][:shared] == primary[:shared]
    assert sent["options"]["tools"] == list(session.tools)
    # The prefix passes its tool-calling reasoning back; the window's reasoning is masked.
    assert any(m.get("reasoning_content") for m in sent["messages"][:shared])
    assert "WINDOW-REASONING" not in json.dumps(sent)
    assert sent["messages"][-1] == {"role": "user", "content": "Review."}
    assert "Roll again, please." in json.dumps(sent["messages"][-2])
