"""End to end: the ``openai`` provider and ``foureyes simulate`` speaking real HTTP.

Replies are shaped after recorded DeepSeek traffic (the third-party data, read in place).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from foureyes.core.digest import sha256_hex
from foureyes.llm.openai_compat import OpenAIProvider
from foureyes.llm.provider import ChatMessage, ChatRequest
from tests.helpers.data import require_data
from tests.helpers.simulator import RunningSimulator, read_cassette


def _cassette(name: str) -> list[dict[str, Any]]:
    return read_cassette(require_data(f"trajectories/cassettes/{name}"))


def _rule(recorded: dict[str, Any]) -> dict[str, Any]:
    """A one-shot scenario rule that replies what a recorded response replied."""
    message = recorded["choices"][0]["message"]
    usage = recorded["usage"]
    rule: dict[str, Any] = {
        "times": 1,
        "content": message.get("content"),
        "reasoning_content": message.get("reasoning_content"),
        "finish_reason": recorded["choices"][0]["finish_reason"],
        "usage": {k: usage[k] for k in ("prompt_tokens", "completion_tokens")},
    }
    if message.get("tool_calls"):
        rule["tool_calls"] = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message["tool_calls"]
        ]
    return {k: v for k, v in rule.items() if v is not None}


@pytest.fixture(params=["aiohttp", "httpx"])
async def deepseek(
    request: pytest.FixtureRequest, simulator: RunningSimulator
) -> AsyncIterator[OpenAIProvider]:
    route = simulator.route("deepseek-reasoner", transport=request.param, timeout_s=5)
    provider = OpenAIProvider("deepseek", route, api_key="unused")
    yield provider
    await provider.aclose()


async def test_a_thinking_tool_loop_passes_its_reasoning_back(
    simulator: RunningSimulator, deepseek: OpenAIProvider
) -> None:
    interactions = _cassette("test_deepseek_deferred_capability_with_thinking.yaml")
    recorded = [i["response"]["parsed_body"] for i in interactions]
    simulator.load({"models": {"deepseek-reasoner": [_rule(r) for r in recorded]}})
    # What the tools answered, as the recorded requests show it.
    tool_results = {
        m["tool_call_id"]: m["content"]
        for i in interactions
        for m in i["request"]["parsed_body"]["messages"]
        if m["role"] == "tool"
    }
    first_request = interactions[0]["request"]["parsed_body"]
    messages = [ChatMessage(**m) for m in first_request["messages"]]
    tools = tuple(first_request["tools"])

    results = []
    for _ in recorded:
        result = await deepseek.complete(
            ChatRequest(messages=tuple(messages), tools=tools), timeout_s=5
        )
        results.append(result)
        messages.append(result.as_assistant_message())
        messages += [
            ChatMessage(role="tool", tool_call_id=call.id, content=tool_results[call.id])
            for call in result.tool_calls
        ]

    assert [r.finish_reason for r in results] == [
        r["choices"][0]["finish_reason"] for r in recorded
    ]
    assert results[0].reasoning_content == recorded[0]["choices"][0]["message"]["reasoning_content"]
    assert results[-1].text == recorded[-1]["choices"][0]["message"]["content"]
    # The point of the test: each later request carries every earlier tool-calling turn
    # with its reasoning, as DeepSeek's thinking mode requires.
    sent = simulator.requests()
    assert len(sent) == len(recorded)
    for later, earlier in ((1, 0), (2, 0), (2, 1)):
        turns = [m for m in sent[later]["messages"] if m["role"] == "assistant"]
        reply = recorded[earlier]["choices"][0]["message"]
        assert turns[earlier]["reasoning_content"] == reply["reasoning_content"]
        assert [c["id"] for c in turns[earlier]["tool_calls"]] == [
            c["id"] for c in reply["tool_calls"]
        ]


async def test_a_recorded_thinking_reply_comes_back_whole(
    simulator: RunningSimulator, deepseek: OpenAIProvider
) -> None:
    (interaction,) = _cassette("test_deepseek_model_thinking_part.yaml")
    recorded = interaction["response"]["parsed_body"]
    simulator.load({"models": {"deepseek-reasoner": [_rule(recorded)]}})
    question = interaction["request"]["parsed_body"]["messages"][0]["content"]
    result = await deepseek.complete(
        ChatRequest(messages=(ChatMessage.user(question),)), timeout_s=5
    )
    message = recorded["choices"][0]["message"]
    assert (result.text, result.reasoning_content) == (
        message["content"],
        message["reasoning_content"],
    )
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (12, 789)


async def test_a_scripted_supervisor_echoes_the_digest_it_was_shown(
    simulator: RunningSimulator, deepseek: OpenAIProvider
) -> None:
    verdict = '{"candidate_sha256": "{{candidate_sha256}}", "decision": "approve"}'
    simulator.load(
        {
            "models": {
                "deepseek-reasoner": [
                    {"times": 1, "content": verdict},
                    {"times": 1, "content": verdict, "fault": "wrong_digest"},
                ]
            }
        }
    )
    candidate = "I hear you. That sounds really hard."
    digest = sha256_hex(candidate)
    prompt = (
        ChatMessage.system("Review the candidate; answer with its sha256."),
        ChatMessage.user(f"candidate_sha256: {digest}\n<candidate>{candidate}</candidate>"),
    )
    honest = await deepseek.complete(ChatRequest(messages=prompt), timeout_s=5)
    lying = await deepseek.complete(ChatRequest(messages=prompt), timeout_s=5)
    assert json.loads(honest.text)["candidate_sha256"] == digest
    assert json.loads(lying.text)["candidate_sha256"] not in (digest, "")
    assert [r["fault"] for r in simulator.requests()] == [None, "wrong_digest"]
