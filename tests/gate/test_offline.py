from __future__ import annotations

import json
from typing import Any

import pytest

import foureyes.gate  # noqa: F401  (importing the gate registers the offline Supervisor)
from foureyes.config import Config
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import RouteBadResponse
from foureyes.core.roles import Role
from foureyes.gate import Verdict, offline_verdict
from foureyes.gate.offline import CANNOT_JUDGE
from foureyes.llm.offline import OfflineProvider, offline_counselor_digests, offline_roles
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.structured import parse_structured


def request(**subject: str) -> ChatRequest:
    return ChatRequest(
        messages=(ChatMessage.user("review"),), role=Role.SUPERVISOR, subject=subject
    )


def test_the_gate_registers_its_offline_supervisor() -> None:
    assert Role.SUPERVISOR in offline_roles()


async def offline_counselor_reply(message: str) -> str:
    counselor = ChatRequest(
        messages=(ChatMessage.user(message),),
        role=Role.COUNSELOR,
        subject={"user_message": message},
    )
    return (await OfflineProvider("offline").complete(counselor, timeout_s=1)).text


@pytest.mark.parametrize("message", ["I can't sleep.", "我睡不着。", "我睡不著，好累。"])
async def test_the_offline_counselors_own_reply_is_approved_by_its_digest(message: str) -> None:
    text = await offline_counselor_reply(message)
    result = await OfflineProvider("offline").complete(
        request(candidate=text, candidate_sha256=sha256_hex(text)), timeout_s=1
    )
    verdict = parse_structured(result.text, Verdict)
    assert result.offline and verdict.decision == "approve"
    assert verdict.candidate_sha256 == sha256_hex(text)


@pytest.mark.parametrize(
    "text",
    [
        "I hear you. That sounds hard.",
        "If the pain is still bad tonight, it is fine to take two more pills than the label says.",
        # An offline template with one character changed is model text, not the template.
        "[Offline automatic reply] I hear you. Feeling this way is exhausting!",
    ],
)
def test_text_the_offline_counselor_did_not_write_is_insufficient(text: str) -> None:
    verdict = parse_structured(offline_verdict(request(candidate=text)), Verdict)
    assert verdict.decision == "insufficient" and verdict.violations == ()
    assert verdict.missing == (CANNOT_JUDGE,)
    assert verdict.candidate_sha256 == sha256_hex(text)


async def test_the_digests_are_exactly_the_replies_the_offline_counselor_writes() -> None:
    messages = [
        f"{stem} {n}" for n in range(60) for stem in ("I feel low", "我很难过", "我很難過，這裡")
    ]
    written = {sha256_hex(await offline_counselor_reply(m)) for m in messages}
    assert written == offline_counselor_digests()


def test_a_rule_hit_is_rejected_naming_rule_and_span() -> None:
    text = "You have depression. Call 400-161-9995."
    verdict = parse_structured(offline_verdict(request(candidate=text, region="CN")), Verdict)
    assert verdict.decision == "reject"
    assert [(v.rule, text[v.span[0] : v.span[1]]) for v in verdict.violations] == [
        ("diagnosis_claim", "You have depression"),
        ("unverified_resource", "400-161-9995"),
    ]
    assert all(v.note.startswith("offline rules-only review:") for v in verdict.violations)


def test_it_names_the_digest_of_what_it_judged_not_what_it_was_told() -> None:
    text = "I hear you."
    answer = json.loads(offline_verdict(request(candidate=text, candidate_sha256="0" * 64)))
    assert answer["candidate_sha256"] == sha256_hex(text)


def test_it_is_deterministic_and_honours_the_length_limit() -> None:
    text = "I hear you. " * 10
    short = request(candidate=text, max_chars="20")
    assert offline_verdict(short) == offline_verdict(short)
    assert json.loads(offline_verdict(short))["violations"][0]["rule"] == "too_long"
    assert json.loads(offline_verdict(request(candidate=text)))["decision"] == "insufficient"


@pytest.mark.parametrize(
    "subject", [{}, {"candidate": "x", "max_chars": "many"}, {"candidate": "x", "max_chars": "0"}]
)
def test_a_request_it_cannot_answer_is_a_bad_response(subject: dict[str, str]) -> None:
    with pytest.raises(RouteBadResponse):
        offline_verdict(request(**subject))


def test_offline_defaults_serve_every_gate_role() -> None:
    config = Config()
    assert {config.roles.counselor, config.roles.supervisor} == {"offline"}
    assert {Role.COUNSELOR, Role.SUPERVISOR} <= offline_roles()


async def test_a_candidate_with_tool_calls_is_insufficient_under_its_whole_digest() -> None:
    # The digest covers the text and the calls (gate/candidate.py); before, the offline
    # Supervisor named the text's digest alone, so the gate saw a verdict mismatch.
    from foureyes.gate.candidate import ToolCall, candidate_sha256, tool_calls_json

    text = "Thank you for telling me."
    calls = (ToolCall.parse("call_1", "book", '{"day": "thursday"}'),)
    raw = offline_verdict(request(candidate=text, tool_calls=tool_calls_json(calls)))
    verdict = parse_structured(raw, Verdict)
    assert verdict.decision == "insufficient" and verdict.missing == (CANNOT_JUDGE,)
    assert verdict.candidate_sha256 == candidate_sha256(text, calls) != sha256_hex(text)
    # Not even the offline Counselor's own reply is approved with a tool call added.
    own = await offline_counselor_reply("I can't sleep.")
    raw = offline_verdict(request(candidate=own, tool_calls=tool_calls_json(calls)))
    assert parse_structured(raw, Verdict).decision == "insufficient"


def test_a_reply_of_tool_calls_alone_is_insufficient_not_a_broken_verdict() -> None:
    calls = '[{"arguments":{"day":"thursday"},"id":"call_1","name":"book_session"}]'
    answer = offline_verdict(request(candidate="", tool_calls=calls))
    verdict = parse_structured(answer, Verdict)  # a verdict its own contract accepts
    assert verdict.decision == "insufficient" and verdict.violations == ()


async def test_the_gate_with_the_offline_supervisor_answers_a_tool_call_draft_insufficient(
    tmp_path: Any,
) -> None:
    from foureyes.config import Config, StoreConfig
    from foureyes.server import create_app
    from tests.helpers.server import app_client

    config = Config(store=StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 'o.db'}"))
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "book_session", "arguments": '{"day": "thursday"}'},
    }
    body = {
        "messages": [{"role": "user", "content": "Book me a session on Thursday."}],
        "draft": {"content": "", "tool_calls": [call]},
    }
    async with app_client(create_app(config, {})) as client:
        answer = (await client.post("/v1/check", json=body)).json()
    assert (answer["decision"], answer["reason"]) == ("fallback", "insufficient")
