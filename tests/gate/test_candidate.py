"""Tool calls in the candidate: the digested bytes, canonicalisation, the tool rules, release."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import (
    GivenDraft,
    Rule,
    RuleCatalogue,
    RuleContext,
    RuleFinding,
    RuleInput,
    ToolCall,
    ToolCallCheck,
    ToolCallProblem,
    ToolCallRefused,
    Verdict,
    candidate_sha256,
    check_tool_calls,
    compose_release,
    decide,
    deliver,
)

TEXT = "I booked the appointment for you."
ARGS = {"when": "2026-12-03T10:00", "who": ["me", "you"], "n": 2}


def openai_call(name: str = "book", arguments: str | None = None, id: str = "c1") -> dict[str, Any]:
    return {
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": arguments or json.dumps(ARGS)},
    }


def independent_digest(text: str, calls: list[tuple[str, str, Any]]) -> str:
    """The documented bytes, built here without foureyes' code."""
    raw = text.encode("utf-8")
    if calls:
        listed = [{"arguments": a, "id": i, "name": n} for i, n, a in calls]
        body = json.dumps(listed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        raw += b"\xff" + body.encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def test_the_digest_is_the_documented_bytes() -> None:
    draft = GivenDraft.of_openai(TEXT, [openai_call()])
    assert draft.sha256 == independent_digest(TEXT, [("c1", "book", ARGS)])
    # Without tool calls the digest is the text's, as for every Counselor draft.
    assert candidate_sha256(TEXT) == hashlib.sha256(TEXT.encode()).hexdigest()
    # A null content is the empty text.
    assert GivenDraft.of_openai(None, [openai_call()]).sha256 == independent_digest(
        "", [("c1", "book", ARGS)]
    )


def test_no_text_alone_has_the_bytes_of_a_candidate_with_tool_calls() -> None:
    with_calls = GivenDraft.of_openai("a", [openai_call()])
    # The JSON a text would need to spell is not enough: the separator is not UTF-8.
    spelled = "a" + json.dumps([{"arguments": ARGS, "id": "c1", "name": "book"}])
    assert candidate_sha256(spelled) != with_calls.sha256


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@given(
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    indent=st.sampled_from([None, 0, 2]),
    reverse=st.booleans(),
)
def test_key_order_and_whitespace_do_not_change_the_digest(
    arguments: dict[str, Any], indent: int | None, reverse: bool
) -> None:
    ordered = dict(sorted(arguments.items(), reverse=reverse))
    written = json.dumps(ordered, indent=indent, separators=None if indent else (", ", ": "))
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    one = GivenDraft.of_openai(TEXT, [openai_call(arguments=written)])
    other = GivenDraft.of_openai(TEXT, [openai_call(arguments=canonical)])
    assert one.sha256 == other.sha256
    # What is delivered is the canonical form, whatever was written.
    delivered = one.tool_calls[0].openai()["function"]["arguments"]
    assert delivered == json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


@given(
    arguments=st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=4),
    data=st.data(),
)
def test_any_change_of_a_name_or_a_value_changes_the_digest(
    arguments: dict[str, Any], data: st.DataObject
) -> None:
    base = GivenDraft.of_openai(TEXT, [openai_call(arguments=json.dumps(arguments))])
    key = data.draw(st.sampled_from(sorted(arguments)))
    changed = dict(arguments) | {key: data.draw(json_values.filter(lambda v: v != arguments[key]))}
    assert (
        GivenDraft.of_openai(TEXT, [openai_call(arguments=json.dumps(changed))]).sha256
        != base.sha256
    )
    assert (
        GivenDraft.of_openai(
            TEXT, [openai_call(name="cancel", arguments=json.dumps(arguments))]
        ).sha256
        != base.sha256
    )


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("{not json", ToolCallProblem.ARGUMENTS_NOT_JSON),
        ('{"a": NaN}', ToolCallProblem.ARGUMENTS_NOT_JSON),
        ('{"a": 1e400}', ToolCallProblem.ARGUMENTS_NOT_JSON),
        ('{"a": 1, "a": 2}', ToolCallProblem.ARGUMENTS_NOT_JSON),
        ('{"a": 1} trailing', ToolCallProblem.ARGUMENTS_NOT_JSON),
    ],
)
def test_arguments_that_are_not_strict_json_are_refused_with_their_reason(
    arguments: str, problem: ToolCallProblem
) -> None:
    with pytest.raises(ToolCallRefused) as caught:
        GivenDraft.of_openai(TEXT, [openai_call(), openai_call(arguments=arguments, id="c2")])
    assert (caught.value.problem, caught.value.index) == (problem, 1)


def test_a_repeated_id_or_an_empty_name_is_refused() -> None:
    with pytest.raises(ToolCallRefused) as caught:
        GivenDraft.of_openai(TEXT, [openai_call(), openai_call()])
    assert caught.value.problem is ToolCallProblem.BAD_ID
    with pytest.raises(ToolCallRefused) as caught:
        GivenDraft.of_openai(TEXT, [openai_call(name="")])
    assert caught.value.problem is ToolCallProblem.BAD_NAME


def check(calls: tuple[ToolCall, ...], text: str = TEXT, **ctx: Any) -> list[str]:
    context = RuleContext(max_chars=1200, region=None, **ctx)
    return [f.rule for f in RuleCatalogue.builtin().check(text, context, calls)]


def test_the_tool_rules_deny_and_allow_by_name() -> None:
    book = ToolCall.parse("c1", "book", "{}")
    assert check((book,)) == []
    assert check((book,), tools_deny=frozenset({"book"})) == ["tool_not_allowed"]
    assert check((book,), tools_allow=frozenset({"cancel"})) == ["tool_not_allowed"]
    assert check((book,), tools_allow=frozenset({"book"})) == []
    # Deny wins over allow.
    both = {"tools_allow": frozenset({"book"}), "tools_deny": frozenset({"book"})}
    assert check((book,), **both) == ["tool_not_allowed"]
    # A draft of tool calls only is not empty; a draft of nothing is.
    assert check((book,), text="") == []
    assert check((), text="") == ["empty_text"]


def test_a_denied_tool_decides_its_own_reason_whatever_the_verdict() -> None:
    book = ToolCall.parse("c1", "book", "{}")
    findings = RuleCatalogue.builtin().check(
        TEXT, RuleContext(max_chars=1200, region=None, tools_deny=frozenset({"book"})), (book,)
    )
    digest = candidate_sha256(TEXT, (book,))
    approve = Verdict(candidate_sha256=digest, decision="approve", violations=[], missing=[])
    decision = decide(
        GenerationPolicy.NORMAL,
        candidate_sha256=digest,
        findings=findings,
        verdict=approve,
        failure=None,
    )
    assert decision.reason is ReasonCode.TOOL_NOT_ALLOWED


NAMES = st.sampled_from(["book", "cancel", "delete_account", "search"])


@given(
    names=st.lists(NAMES, min_size=1, max_size=4),
    allow=st.frozensets(NAMES),
    deny=st.frozensets(NAMES),
)
def test_checking_tool_calls_alone_decides_as_the_gate_decides_a_draft_of_them(
    names: list[str], allow: frozenset[str], deny: frozenset[str]
) -> None:
    calls = tuple(ToolCall.parse(f"c{i}", name, "{}") for i, name in enumerate(names))
    context = RuleContext(max_chars=1200, region=None, tools_allow=allow, tools_deny=deny)
    catalogue = RuleCatalogue.builtin()
    checked = check_tool_calls(catalogue, context, calls)
    digest = candidate_sha256("", calls)
    approve = Verdict(candidate_sha256=digest, decision="approve", violations=[], missing=[])
    decision = decide(
        GenerationPolicy.NORMAL,
        candidate_sha256=digest,
        findings=catalogue.check("", context, calls),
        verdict=approve,
        failure=None,
    )
    forbidden = {n for n in names if n in deny or (allow and n not in allow)}
    assert isinstance(checked, ToolCallCheck) and checked.tool_calls == calls
    assert checked.allowed is decision.released is (not forbidden)
    assert checked.reason == (None if decision.released else decision.reason)
    assert len(checked.findings) == sum(1 for n in names if n in forbidden)


def _no_wire_transfers(candidate: RuleInput) -> list[RuleFinding]:
    end = len(candidate.text)
    return [
        RuleFinding("no_wire", (end, end), "a transfer above 100")
        for call in candidate.tool_calls
        if call.name == "transfer" and call.arguments.get("amount", 0) > 100
    ]


def test_a_rule_that_reads_tool_calls_refuses_them_alone_as_in_a_draft() -> None:
    no_wire = Rule("no_wire", {loc: "No large transfer." for loc in Locale}, _no_wire_transfers)
    catalogue = RuleCatalogue((*RuleCatalogue.builtin().rules, no_wire))
    context = RuleContext(max_chars=1200, region=None, tools_deny=frozenset({"delete"}))
    small = ToolCall.parse("c1", "transfer", '{"amount": 5}')
    large = ToolCall.parse("c2", "transfer", '{"amount": 500}')
    assert check_tool_calls(catalogue, context, (small,)).allowed
    refused = check_tool_calls(catalogue, context, (small, large))
    assert refused.reason is ReasonCode.RULE_VIOLATION
    assert [f.rule for f in refused.findings] == ["no_wire"]
    # A denied tool is its own reason even when another rule fired too.
    both = check_tool_calls(catalogue, context, (large, ToolCall.parse("c3", "delete", "{}")))
    assert both.reason is ReasonCode.TOOL_NOT_ALLOWED
    with pytest.raises(UsageError):
        check_tool_calls(catalogue, context, ())


def released(text: str, calls: tuple[ToolCall, ...], approved: str) -> Any:
    approve = Verdict(candidate_sha256=approved, decision="approve", violations=[], missing=[])
    decision = decide(
        GenerationPolicy.NORMAL,
        candidate_sha256=approved,
        findings=(),
        verdict=approve,
        failure=None,
    )
    return compose_release(
        decision,
        text,
        policy=GenerationPolicy.NORMAL,
        locale=Locale.EN,
        region=None,
        tool_calls=calls,
    )


def test_a_release_delivers_exactly_the_digested_tool_calls() -> None:
    book = ToolCall.parse("c1", "book", '{"when": "10:00"}')
    digest = candidate_sha256(TEXT, (book,))
    delivery = deliver(released(TEXT, (book,), digest))
    assert (delivery.reason, delivery.tool_calls) == (ReasonCode.APPROVED, (book,))
    assert delivery.candidate_sha256 == digest


def test_a_swapped_tool_call_falls_back_and_carries_no_call() -> None:
    book = ToolCall.parse("c1", "book", '{"when": "10:00"}')
    other = ToolCall.parse("c1", "book", '{"when": "23:00"}')
    approved = candidate_sha256(TEXT, (book,))
    for calls in ((other,), (), (book, ToolCall.parse("c2", "book", "{}"))):
        delivery = deliver(released(TEXT, calls, approved))
        assert (delivery.reason, delivery.tool_calls) == (ReasonCode.VERDICT_MISMATCH, ())
