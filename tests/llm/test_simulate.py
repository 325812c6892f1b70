"""The simulator: scenario schema, rule picking, replies, and the real HTTP server and CLI."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import signal
import socket
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionUserMessageParam

from foureyes.config import GateConfig, RouteConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import ConfigError
from foureyes.gate import RuleCatalogue
from foureyes.llm._scenario import (
    Fault,
    RuleBook,
    UnresolvedPlaceholder,
    last_message_text,
    load_scenario,
    parse_scenario,
    registered_rule_ids,
    render_reply,
)
from tests.helpers.data import require_data
from tests.helpers.simulator import (
    SCENARIOS,
    RunningSimulator,
    read_cassette,
    simulate_command,
)

DIGEST_A = sha256_hex("candidate A")
DIGEST_B = sha256_hex("candidate B")


def _user(text: str) -> ChatCompletionUserMessageParam:
    return {"role": "user", "content": text}


# --- scenario files -----------------------------------------------------------------------


def test_toml_and_json_files_share_one_schema(tmp_path: Path) -> None:
    data = {
        "api_key": "k",
        "models": {"m": [{"match": "^hi", "times": 2, "content": "hello"}, {"fault": "hang"}]},
    }
    json_file = tmp_path / "s.json"
    json_file.write_text(json.dumps(data))
    toml_file = tmp_path / "s.toml"
    toml_file.write_text(
        'api_key = "k"\n[[models.m]]\nmatch = "^hi"\ntimes = 2\ncontent = "hello"\n'
        '[[models.m]]\nfault = "hang"\n'
    )
    assert load_scenario(json_file) == load_scenario(toml_file)


def test_the_fixture_scenarios_are_valid() -> None:
    for path in SCENARIOS.glob("*.toml"):
        assert load_scenario(path).models


def _simulator_docs() -> str:
    root = Path(__file__).parents[2]
    return "\n".join(
        (root / name).read_text(encoding="utf-8") for name in ("README.md", "docs/simulate.md")
    )


def test_every_example_in_the_docs_is_valid() -> None:
    docs = _simulator_docs()
    examples = [tomllib.loads(t) for t in re.findall(r"```toml\n(.*?)```", docs, re.DOTALL)]
    examples += [json.loads(t) for t in re.findall(r"```json\n(.*?)```", docs, re.DOTALL)]
    scenarios = [e for e in examples if "models" in e]
    assert len(scenarios) >= 4
    for example in scenarios:
        parse_scenario(example, source="docs/simulate.md")
    for example in examples:
        for route in example.get("routes", {}).values():
            RouteConfig(**route)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"models": {"m": [{"contnet": "typo"}]}}, "unknown key 'models.m.0.contnet'"),
        ({"models": {"m": []}, "port": 1}, "unknown key 'port'"),
        ({"models": {"m": [{"match": "(unclosed"}]}}, "invalid regex '(unclosed'"),
        ({"models": {"m": [{"fault": "explode"}]}}, "models.m.0.fault: Input should be"),
        ({"models": {"m": [{"fault": "delay"}]}}, "delay_s is required by"),
        ({"models": {"m": [{"content": "x", "delay_s": 1}]}}, "only valid with, fault 'delay'"),
        ({"models": {"m": [{"fault": "http_500", "retry_after_s": 1}]}}, "only valid with"),
        ({"models": {"m": [{"content": "{{digest}}"}]}}, "unknown placeholder(s) {{digest}}"),
        ({"models": {"m": [{"fault": "truncated"}]}}, "'truncated' needs content"),
        ({"models": {"m": [{"fault": "wrong_digest", "content": "no hex"}]}}, "needs a 64-hex"),
        ({"models": {"m": [{"times": 0}]}}, "models.m.0.times"),
        ({"models": {"m": [{"content": "x", "stream_interval_s": -1}]}}, "stream_interval_s"),
        ({"models": {}}, "models: "),
        ({"models": {" ": []}}, "model names must not be empty"),
    ],
)
def test_invalid_scenarios_name_the_problem(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scenario(data, source="s.json")
    assert any(expected in p and p.startswith("s.json: ") for p in caught.value.problems), (
        caught.value.problems
    )


def _verdict(*rules: str, fenced: bool = False) -> str:
    violations = [{"rule": r, "span": [0, 1], "note": "x"} for r in rules]
    verdict = json.dumps(
        {
            "candidate_sha256": "{{candidate_sha256}}",
            "decision": "reject" if rules else "approve",
            "violations": violations,
            "missing": [],
        }
    )
    return f"```json\n{verdict}\n```" if fenced else verdict


@pytest.mark.parametrize("fenced", [False, True])
def test_a_scripted_verdict_citing_a_rule_outside_the_catalogue_does_not_load(
    fenced: bool,
) -> None:
    data = {
        "models": {
            "supervisor-sim": [
                {"content": _verdict("dismissive")},
                {"name": "typo", "content": _verdict("dismisive", fenced=fenced)},
            ]
        }
    }
    with pytest.raises(ConfigError) as caught:
        parse_scenario(data, source="s.toml")
    [problem] = caught.value.problems
    assert problem.startswith("s.toml: models.supervisor-sim.1 (typo): ")
    assert "cites rule 'dismisive', which is not in the rule catalogue" in problem
    assert "(did you mean 'dismissive'?)" in problem
    assert f"(known: {', '.join(sorted(registered_rule_ids()))})" in problem
    assert "review_malformed" in problem


def test_an_id_far_from_every_rule_has_no_guess_and_each_unknown_id_is_named() -> None:
    data = {"models": {"s": [{"content": _verdict("be_nicer", "zzz", "too_long")}]}}
    with pytest.raises(ConfigError) as caught:
        parse_scenario(data)
    assert len(caught.value.problems) == 2
    be_nicer, zzz = caught.value.problems
    assert "'be_nicer'" in be_nicer and "'zzz'" in zzz
    assert "did you mean" not in zzz


def test_extra_rule_ids_are_the_ids_a_deployment_adds() -> None:
    data = {"extra_rule_ids": ["no_refund_promise"], "models": {"s": [{"content": _verdict()}]}}
    data["models"]["s"].append({"content": _verdict("no_refund_promise", "dismissive")})
    assert parse_scenario(data).extra_rule_ids == ("no_refund_promise",)
    with pytest.raises(ConfigError, match="extra_rule_ids"):
        parse_scenario({"extra_rule_ids": "x", "models": {"s": []}})


@pytest.mark.parametrize(
    "content",
    [
        '{"rule": "be_nicer"}',  # no verdict: no candidate_sha256 and decision
        '{"candidate_sha256": "x", "decision": "reject", "violations": "be_nicer"}',
        '{"candidate_sha256": "x", "decision": "reject", "violations": [{"rule": 3}]}',
        "be_nicer",
        '[{"rule": "be_nicer"}]',
    ],
)
def test_content_that_is_no_verdict_or_cites_no_rule_id_is_left_to_the_gate(
    content: str,
) -> None:
    assert parse_scenario({"models": {"s": [{"content": content}]}}).models["s"]


def test_the_ids_a_scenario_checks_are_the_gate_catalogue() -> None:
    assert set(registered_rule_ids()) == RuleCatalogue.from_config(GateConfig()).ids


@given(
    st.sampled_from(sorted(RuleCatalogue.builtin().ids))
    | st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
)
def test_a_verdict_loads_exactly_when_its_rule_is_in_the_catalogue(rule: str) -> None:
    data = {"models": {"s": [{"content": _verdict(rule)}]}}
    if rule in RuleCatalogue.builtin().ids:
        assert parse_scenario(data).models["s"]
    else:
        with pytest.raises(ConfigError, match=re.escape(repr(rule))):
            parse_scenario(data)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("s.toml", "models = [", "is not valid TOML"),
        ("s.json", "{models", "is not valid JSON"),
        ("s.json", '{"models": {"m": [{"fault": "nope"}]}}', "models.m.0.fault"),
    ],
)
def test_bad_scenario_files_are_config_errors(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_scenario(path)


def test_a_missing_scenario_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_scenario(tmp_path / "absent.toml")


def test_the_api_key_is_masked_in_reprs_and_dumps() -> None:
    scenario = parse_scenario({"api_key": "sk-very-secret", "models": {"m": []}})
    assert "sk-very-secret" not in repr(scenario)
    assert "sk-very-secret" not in json.dumps(scenario.model_dump(mode="json"))


# --- picking rules ------------------------------------------------------------------------


def test_rules_are_tried_in_order_and_times_limits_them() -> None:
    book = RuleBook(
        parse_scenario(
            {
                "models": {
                    "m": [
                        {"name": "first-hi", "match": "hi", "times": 1, "content": "1"},
                        {"name": "any-hi", "match": "hi", "content": "2"},
                        {"name": "once", "times": 1, "content": "3"},
                    ]
                }
            }
        )
    )
    picks = [book.pick("m", [_user(text)]) for text in ("hi", "hi", "bye", "bye")]
    assert [p[1].name if p else None for p in picks] == ["first-hi", "any-hi", "once", None]
    book.reset()
    assert book.pick("m", [_user("hi")]) == (0, book.scenario.models["m"][0])


def test_a_request_scoped_match_reads_every_message_in_order() -> None:
    book = RuleBook(
        parse_scenario(
            {
                "models": {
                    "m": [
                        {"name": "both", "match": "(?s)task.*review", "match_scope": "request"},
                        {"name": "last", "match": "review"},
                    ]
                }
            }
        )
    )

    def name(*texts: str) -> str | None:
        picked = book.pick("m", [_user(t) for t in texts])
        return picked[1].name if picked else None

    assert name("the task", "a review") == "both"
    assert name("a review", "the task") is None  # the order counts; the last says no review
    assert name("other", "a review") == "last"  # the default scope reads the last message


def test_a_model_without_rules_never_answers() -> None:
    book = RuleBook(parse_scenario({"models": {"m": []}}))
    assert book.knows("m") and not book.knows("other")
    assert book.pick("m", [_user("anything")]) is None


def test_the_last_message_text_joins_text_parts() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    assert last_message_text([_user("x"), {"role": "user", "content": parts}]) == "ab"
    assert last_message_text([{"role": "assistant", "content": None}]) == ""


# --- making replies -----------------------------------------------------------------------


def _rule(**fields: Any) -> Any:
    return parse_scenario({"models": {"m": [fields]}}).models["m"][0]


def test_the_digest_placeholder_takes_the_latest_message_with_a_digest() -> None:
    rule = _rule(content="{{candidate_sha256}}/{{ model }}")
    messages = [_user(f"old {DIGEST_A}"), _user(f"new {DIGEST_B} then {DIGEST_A}"), _user("none")]
    reply = render_reply(rule, model="sup", messages=messages, seq=1)
    assert reply.content == f"{DIGEST_B}/sup"


def test_a_longer_hex_run_is_not_a_digest() -> None:
    rule = _rule(content="{{candidate_sha256}}")
    with pytest.raises(UnresolvedPlaceholder, match="candidate_sha256"):
        render_reply(rule, model="m", messages=[_user("0" * 65)], seq=1)


def test_wrong_digest_swaps_every_digest_everywhere() -> None:
    rule = _rule(
        fault="wrong_digest",
        content="{{candidate_sha256}}",
        reasoning_content=f"I saw {DIGEST_A}",
        tool_calls=[{"name": "approve", "arguments": {"sha256": "{{candidate_sha256}}"}}],
    )
    reply = render_reply(rule, model="m", messages=[_user(DIGEST_A)], seq=1)
    assert reply.content is not None and re.fullmatch(r"[0-9a-f]{64}", reply.content)
    assert reply.content != DIGEST_A
    assert DIGEST_A not in (reply.reasoning_content or "")
    assert json.loads(reply.tool_calls[0].arguments) == {"sha256": reply.content}


def test_truncated_keeps_the_first_half_and_finishes_with_length() -> None:
    rule = _rule(fault="truncated", content="abcdefghij", tool_calls=[{"name": "t"}])
    reply = render_reply(rule, model="m", messages=[_user("x")], seq=1)
    assert (reply.content, reply.tool_calls, reply.finish_reason) == ("abcde", (), "length")


def test_reply_defaults_finish_reason_ids_and_estimated_usage() -> None:
    calls = render_reply(
        _rule(tool_calls=[{"name": "a"}, {"name": "b", "id": "mine", "arguments": '{"x": 1}'}]),
        model="m",
        messages=[_user("12345678")],
        seq=7,
    )
    assert calls.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in calls.tool_calls] == [
        ("call_7_0", "a", "{}"),
        ("mine", "b", '{"x": 1}'),
    ]
    assert calls.prompt_tokens == 2  # eight characters, four to a token
    text = render_reply(_rule(content="abcde"), model="m", messages=[_user("x")], seq=1)
    assert (text.finish_reason, text.completion_tokens) == ("stop", 2)
    given = _rule(content="x", usage={"prompt_tokens": 11, "completion_tokens": 22})
    usage = render_reply(given, model="m", messages=[_user("x")], seq=1)
    assert (usage.prompt_tokens, usage.completion_tokens) == (11, 22)


def test_every_fault_is_documented() -> None:
    docs = _simulator_docs()
    assert all(f"`{fault.value}`" in docs for fault in Fault)


# --- the HTTP server ----------------------------------------------------------------------


def _client(sim: RunningSimulator, key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key, base_url=sim.base_url, max_retries=0)


def _sse_lines(sim: RunningSimulator, body: dict[str, Any]) -> list[str]:
    with httpx.stream("POST", f"{sim.base_url}/chat/completions", json=body, timeout=5) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return [line for line in r.iter_lines() if line]


async def test_a_plain_completion_has_the_openai_shape(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"m": [{"content": "hi", "reasoning_content": "think"}]}})
    async with _client(simulator) as client:
        completion = await client.chat.completions.create(model="m", messages=[_user("x")])
    assert completion.object == "chat.completion" and completion.model == "m"
    message = completion.choices[0].message
    assert (message.role, message.content) == ("assistant", "hi")
    assert message.model_extra == {"reasoning_content": "think"}
    assert completion.usage is not None and completion.usage.total_tokens == 1 + 2


async def test_streaming_sends_reasoning_then_content_then_tool_calls(
    simulator: RunningSimulator,
) -> None:
    simulator.load(
        {
            "models": {
                "m": [
                    {
                        "reasoning_content": "Let me think about this for a while.",
                        "content": "Here is a reply that spans several chunks.",
                        "tool_calls": [{"name": "lookup", "arguments": {"q": "a long query"}}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
                    }
                ]
            }
        }
    )
    async with _client(simulator) as client:
        stream = await client.chat.completions.create(
            model="m",
            messages=[_user("x")],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning_content", "") for d in deltas)
    content = "".join(d.content or "" for d in deltas)
    arguments = "".join(
        call.function.arguments or ""
        for d in deltas
        for call in d.tool_calls or ()
        if call.function is not None
    )
    assert reasoning == "Let me think about this for a while."
    assert content == "Here is a reply that spans several chunks."
    assert json.loads(arguments) == {"q": "a long query"}
    assert len([d for d in deltas if d.content]) > 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 7


def test_a_stream_ends_with_done(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"m": [{"content": "fine"}]}})
    lines = _sse_lines(simulator, {"model": "m", "messages": [_user("x")], "stream": True})
    assert lines[-1] == "data: [DONE]"
    last_chunk = json.loads(lines[-2].removeprefix("data: "))
    assert last_chunk["choices"][0]["finish_reason"] == "stop"


def test_a_paced_stream_sends_the_same_chunks(simulator: RunningSimulator) -> None:
    text = "A reply long enough to span several chunks of the stream."
    simulator.load(
        {
            "models": {
                "plain": [{"content": text}],
                "paced": [{"content": text, "stream_interval_s": 0.001}],
            }
        }
    )

    def chunks(model: str) -> list[dict[str, Any]]:
        body = {"model": model, "messages": [_user("x")], "stream": True}
        lines = _sse_lines(simulator, body)
        assert lines[-1] == "data: [DONE]"
        return [json.loads(line.removeprefix("data: "))["choices"] for line in lines[:-1]]

    plain, paced = chunks("plain"), chunks("paced")
    assert paced == plain and len(paced) > 3


def test_a_truncated_stream_stops_without_finish_reason_or_done(
    simulator: RunningSimulator,
) -> None:
    simulator.load({"models": {"m": [{"fault": "truncated", "content": "0123456789" * 4}]}})
    lines = _sse_lines(simulator, {"model": "m", "messages": [_user("x")], "stream": True})
    assert "data: [DONE]" not in lines
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "0123456789" * 2


async def test_a_truncated_stream_ends_the_sdk_iteration_without_a_finish_reason(
    simulator: RunningSimulator,
) -> None:
    simulator.load({"models": {"m": [{"fault": "truncated", "content": "abcdefghij"}]}})
    async with _client(simulator) as client:
        stream = await client.chat.completions.create(model="m", messages=[_user("x")], stream=True)
        chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "abcde"
    assert {c.choices[0].finish_reason for c in chunks} == {None}


async def test_a_malformed_stream_chunk_is_not_json(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"m": [{"fault": "malformed_json"}]}})
    async with _client(simulator) as client:
        stream = await client.chat.completions.create(model="m", messages=[_user("x")], stream=True)
        with pytest.raises(json.JSONDecodeError):
            async for _ in stream:
                pass


def test_a_malformed_body_claims_json_but_is_not(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"m": [{"fault": "malformed_json"}]}})
    response = httpx.post(
        f"{simulator.base_url}/chat/completions", json={"model": "m", "messages": [_user("x")]}
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        response.json()


async def test_errors_are_openai_style_and_name_the_model(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"m": [{"match": "^yes$", "content": "ok"}]}})
    async with _client(simulator) as client:
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.chat.completions.create(model="ghost", messages=[_user("yes")])
        with pytest.raises(openai.BadRequestError) as unmatched:
            await client.chat.completions.create(model="m", messages=[_user("no")])
    assert unknown.value.code == "model_not_found" and "'ghost'" in unknown.value.message
    assert unmatched.value.code == "no_matching_rule" and "'m'" in unmatched.value.message
    assert [(r["status"], r["error"]) for r in simulator.requests()] == [
        (404, "model_not_found"),
        (400, "no_matching_rule"),
    ]


def test_an_unresolved_placeholder_is_an_error_not_a_guess(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"m": [{"content": "{{candidate_sha256}}"}]}})
    response = httpx.post(
        f"{simulator.base_url}/chat/completions",
        json={"model": "m", "messages": [_user("no digest here")]},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unresolved_placeholder"


def test_a_body_that_is_not_a_chat_request_is_a_400(simulator: RunningSimulator) -> None:
    for body in (b"not json", b'{"model": "m"}', b'{"model": "m", "messages": []}'):
        response = httpx.post(f"{simulator.base_url}/chat/completions", content=body)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_body"


def test_the_scenario_key_guards_completions_and_models(simulator: RunningSimulator) -> None:
    simulator.load({"api_key": "sk-right", "models": {"m": [{"content": "ok"}]}})
    body = {"model": "m", "messages": [_user("x")]}
    url = f"{simulator.base_url}/chat/completions"
    wrong = httpx.post(url, json=body, headers={"authorization": "Bearer sk-wrong-key-123"})
    right = httpx.post(url, json=body, headers={"authorization": "Bearer sk-right"})
    models = httpx.get(f"{simulator.base_url}/models", headers={"authorization": "Bearer no"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    assert "sk-wrong-key-123" not in wrong.text
    assert right.status_code == 200 and models.status_code == 401
    assert "sk-wrong-key-123" not in simulator.log_path.read_text(encoding="utf-8")


def test_models_lists_the_scenario_models(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"b": [], "a": []}})
    listing = httpx.get(f"{simulator.base_url}/models").json()
    assert [m["id"] for m in listing["data"]] == ["a", "b"]


def test_every_request_is_logged_in_memory_and_in_the_file(simulator: RunningSimulator) -> None:
    simulator.load({"models": {"m": [{"name": "only", "content": "ok"}]}})
    body = {"model": "m", "messages": [_user("logged")], "temperature": 0.5}
    httpx.post(f"{simulator.base_url}/chat/completions", json=body)
    (entry,) = simulator.requests()
    assert entry["messages"] == [_user("logged")] and entry["options"] == {"temperature": 0.5}
    assert (entry["rule"], entry["rule_name"], entry["fault"]) == (0, "only", None)
    assert (entry["status"], entry["error"], entry["stream"]) == (200, None, False)
    lines = simulator.log_path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[-1]) == entry
    simulator.reset()
    assert simulator.requests() == []


async def test_in_flight_counts_the_requests_being_served_when_one_arrives(
    simulator: RunningSimulator,
) -> None:
    rules = [{"name": "held", "match": "^hang$", "fault": "hang"}, {"content": "ok"}]
    simulator.load({"models": {"m": rules}})
    async with _client(simulator) as client:
        for text in ("one", "after", "another"):
            await client.chat.completions.create(model="m", messages=[_user(text)])
        held = asyncio.ensure_future(
            client.chat.completions.create(model="m", messages=[_user("hang")])
        )
        for _ in range(1000):  # a hang is logged when it is picked, then held
            if len(simulator.requests()) == 4:
                break
            await asyncio.sleep(0.01)
        await client.chat.completions.create(model="m", messages=[_user("while held")])
        held.cancel()
        await asyncio.gather(held, return_exceptions=True)
    log = sorted(simulator.requests(), key=lambda r: r["seq"])
    assert [r["rule_name"] for r in log] == [None, None, None, "held", None]
    assert [r["in_flight"] for r in log] == [1, 1, 1, 1, 2]


def test_an_invalid_scenario_is_refused_at_run_time(simulator: RunningSimulator) -> None:
    response = httpx.put(
        f"{simulator.url}/_sim/scenario", json={"models": {"m": [{"fault": "nope"}]}}
    )
    assert response.status_code == 422
    assert any("models.m.0.fault" in p for p in response.json()["error"]["problems"])
    current = httpx.get(f"{simulator.url}/_sim/scenario").json()
    assert "sim-default" in current["models"]


def test_a_verdict_citing_an_unknown_rule_is_refused_when_put(simulator: RunningSimulator) -> None:
    scenario = {"models": {"supervisor-sim": [{"content": _verdict("be_nicer")}]}}
    response = httpx.put(f"{simulator.url}/_sim/scenario", json=scenario)
    assert response.status_code == 422
    [problem] = response.json()["error"]["problems"]
    assert "cites rule 'be_nicer', which is not in the rule catalogue" in problem
    assert "sim-default" in httpx.get(f"{simulator.url}/_sim/scenario").json()["models"]
    simulator.load({**scenario, "extra_rule_ids": ["be_nicer"]})


# --- real traffic -------------------------------------------------------------------------


async def test_a_recorded_deepseek_stream_replays_through_the_simulator(
    simulator: RunningSimulator,
) -> None:
    cassette = require_data("trajectories/cassettes/test_deepseek_model_thinking_stream.yaml")
    (interaction,) = read_cassette(cassette)
    events = [
        json.loads(line.removeprefix("data: "))
        for line in interaction["response"]["body"]["string"].split("\n\n")
        if line.startswith("data: {")
    ]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    content = "".join(d.get("content") or "" for d in deltas)
    assert reasoning and content
    request = interaction["request"]["parsed_body"]
    simulator.load(
        {"models": {request["model"]: [{"reasoning_content": reasoning, "content": content}]}}
    )
    async with _client(simulator) as client:
        stream = await client.chat.completions.create(
            model=request["model"], messages=request["messages"], stream=True
        )
        replayed = [chunk.choices[0].delta async for chunk in stream if chunk.choices]
    assert (
        "".join((d.model_extra or {}).get("reasoning_content", "") for d in replayed) == reasoning
    )
    assert "".join(d.content or "" for d in replayed) == content


# --- the command line ---------------------------------------------------------------------


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        simulate_command("simulate", *args), capture_output=True, text=True, timeout=30
    )


def test_the_cli_prints_a_readable_url_and_serves() -> None:
    process = subprocess.Popen(
        simulate_command("simulate", "--scenario", str(SCENARIOS / "default.toml"), "--port", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert found, line
        models = httpx.get(f"{found.group(1)}/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["sim-default"]
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()


def test_the_cli_stops_on_sigint_releasing_held_requests() -> None:
    process = subprocess.Popen(
        simulate_command(
            "simulate", "--scenario", str(SCENARIOS / "faults.toml"), "--port", "0", "--json"
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    ready = json.loads(process.stdout.readline())
    with httpx.Client(base_url=ready["base_url"], timeout=10) as client:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            held = pool.submit(
                client.post,
                "/chat/completions",
                json={"model": "faulty", "messages": [_user("hang")]},
                headers={"authorization": "Bearer sim-test-key"},
            )
            for _ in range(1000):  # signal only once the hang is logged, that is held
                if httpx.get(f"{ready['url']}/_sim/requests").json()["requests"]:
                    break
                time.sleep(0.01)
            process.send_signal(signal.SIGINT)
            response = held.result(timeout=10)
    assert process.wait(timeout=10) == 0
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "simulator_stopping"
    assert process.stderr.read() == ""
    process.stdout.close()
    process.stderr.close()


@pytest.mark.parametrize("as_json", [False, True])
def test_the_cli_rejects_a_bad_scenario_before_listening(tmp_path: Path, as_json: bool) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[models.m]]\nfault = "explode"\nmatch = "("\n')
    result = _run_cli("--scenario", str(bad), "--port", "0", *(["--json"] if as_json else []))
    assert result.returncode == 1
    if as_json:
        report = json.loads(result.stdout)
        assert report["ok"] is False and report["error"] == "ConfigError"
        problems = report["problems"]
    else:
        problems = result.stderr.splitlines()
    assert any("models.m.0.fault" in p for p in problems)
    assert any("invalid regex '('" in p for p in problems)


def test_the_cli_refuses_a_scripted_verdict_citing_an_unknown_rule(tmp_path: Path) -> None:
    bad = tmp_path / "supervisor.toml"
    bad.write_text(f"[[models.supervisor-sim]]\ncontent = '{_verdict('dismisive')}'\n")
    result = _run_cli("--scenario", str(bad), "--port", "0", "--json")
    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert "'dismisive'" in problem and "did you mean 'dismissive'?" in problem


def test_the_cli_reports_a_port_in_use() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = _run_cli(
            "--scenario", str(SCENARIOS / "default.toml"), "--port", str(port), "--json"
        )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in json.loads(result.stdout)["problems"][0]


def test_the_cli_reports_a_log_file_it_cannot_open(tmp_path: Path) -> None:
    log = tmp_path / "missing-dir" / "log.jsonl"
    result = _run_cli("--scenario", str(SCENARIOS / "default.toml"), "--log", str(log))
    assert result.returncode == 1 and "cannot open log file" in result.stderr


def test_the_cli_requires_a_scenario() -> None:
    result = _run_cli("--port", "0")
    assert result.returncode != 0 and "--scenario" in result.stderr
