"""The one structured-output parser and the call-level retry around it."""

from __future__ import annotations

import json
import math
from collections import deque
from enum import StrEnum
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foureyes.core.errors import ContractError, RouteTimeout, UsageError
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult, ToolCall
from foureyes.llm.structured import (
    Clamped,
    ParseFailure,
    StructuredFailure,
    StructuredSuccess,
    check_finished,
    complete_structured,
    finish_failure,
    json_schema_format,
    parse_structured,
)


class Decision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    INSUFFICIENT = "insufficient"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Violation(_Strict):
    rule: str
    span: tuple[int, int]
    note: str


class Verdict(_Strict):
    decision: Decision
    certainty: Literal["certain", "likely", "uncertain"]
    confidence: Annotated[float, Clamped(0, 1)]
    violations: tuple[Violation, ...] = ()
    missing: tuple[str, ...] = ()


class Lenient(BaseModel):
    decision: Decision


class LenientInside(_Strict):
    inner: Lenient


def verdict_json(**changes: Any) -> str:
    data: dict[str, Any] = {
        "decision": "approve",
        "certainty": "likely",
        "confidence": 0.9,
        "violations": [{"rule": "R1", "span": [0, 4], "note": "n"}],
        "missing": [],
    }
    data.update(changes)
    return json.dumps(data, ensure_ascii=False)


VALID = verdict_json()
EXPECTED = Verdict.model_validate_json(VALID)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(VALID, id="bare"),
        pytest.param(f"Here is my verdict:\n{VALID}", id="prose-before"),
        pytest.param(f"{VALID}\nHope this helps!", id="prose-after"),
        pytest.param(f"```json\n{VALID}\n```", id="code-fence"),
        pytest.param(f"Sure.\n```json\n{VALID}\n```\nDone.", id="fence-in-prose"),
        pytest.param(f"```\n{VALID}\n```", id="fence-without-language"),
        pytest.param(f"Use {{braces}} like this: {VALID}", id="stray-braces-before"),
        pytest.param(f"function() {{ return {VALID}; }}", id="inside-code"),
        pytest.param(f"  \n\t{VALID}\n\n", id="whitespace"),
    ],
)
def test_tolerated_wrappers(text: str) -> None:
    assert parse_structured(text, Verdict) == EXPECTED


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        pytest.param(VALID, True, id="bare"),
        pytest.param(f"  \n\t{VALID}\n\n", True, id="whitespace"),
        pytest.param(f"```json\n{VALID}\n```", True, id="code-fence"),
        pytest.param(f"```\n{VALID}\n```", True, id="fence-without-language"),
        pytest.param(f"Here is my verdict:\n{VALID}", False, id="prose-before"),
        pytest.param(f"{VALID}\nHope this helps!", False, id="prose-after"),
        pytest.param(f"Sure.\n```json\n{VALID}\n```", False, id="fence-in-prose"),
        pytest.param(f"```verdict below\n{VALID}\n```", False, id="prose-as-fence-info"),
    ],
)
def test_a_whole_answer_is_the_object_alone(text: str, whole: bool) -> None:
    assert parse_structured(text, Verdict) == EXPECTED  # the first object, in any case
    if whole:
        assert parse_structured(text, Verdict, whole=True) == EXPECTED
    else:
        with pytest.raises(ContractError) as caught:
            parse_structured(text, Verdict, whole=True)
        assert caught.value.reason == ParseFailure.EXTRA_TEXT


def test_nested_objects_and_braces_inside_strings() -> None:
    text = verdict_json(
        violations=[{"rule": "{R1}", "span": [0, 1], "note": 'says "}{" and {"a": 1}'}],
        missing=["{", "}"],
    )
    verdict = parse_structured(f"prefix {text} suffix {{", Verdict)
    assert verdict.violations[0].rule == "{R1}"
    assert verdict.violations[0].note == 'says "}{" and {"a": 1}'
    assert verdict.missing == ("{", "}")


def test_unicode_and_cjk_content() -> None:
    note = "我真的很难过 😢 — 這是測試「引號」"
    answer = verdict_json(violations=[{"rule": "R", "span": [1, 2], "note": note}])
    text = f"好的，结果如下：\n{answer}"
    assert parse_structured(text, Verdict).violations[0].note == note
    escaped = verdict_json(missing=["\u6211"]).replace("我", "\\u6211")
    assert parse_structured(escaped, Verdict).missing == ("我",)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("", ParseFailure.EMPTY, id="empty"),
        pytest.param(" \n\t ", ParseFailure.EMPTY, id="whitespace"),
        pytest.param("I approve this reply.", ParseFailure.NO_JSON, id="prose"),
        pytest.param("NaN", ParseFailure.NO_JSON, id="bare-nan"),
        pytest.param(f"[{VALID}]", ParseFailure.NOT_OBJECT, id="array"),
        pytest.param('"approve"', ParseFailure.NOT_OBJECT, id="string"),
        pytest.param("0.9", ParseFailure.NOT_OBJECT, id="number"),
        pytest.param("null", ParseFailure.NOT_OBJECT, id="null"),
        pytest.param("```json\n[1, 2]\n```", ParseFailure.NOT_OBJECT, id="fenced-array"),
        pytest.param(VALID[:-1], ParseFailure.INVALID_JSON, id="unclosed"),
        pytest.param(VALID[: len(VALID) // 2], ParseFailure.INVALID_JSON, id="cut-mid-value"),
        pytest.param('{"outer": ' + VALID, ParseFailure.INVALID_JSON, id="truncated-outer"),
        pytest.param("{'decision': 'approve'}", ParseFailure.INVALID_JSON, id="python-quotes"),
        pytest.param('{"decision": "approve",}', ParseFailure.INVALID_JSON, id="trailing-comma"),
        pytest.param(
            verdict_json(confidence=0.5).replace("0.5", "NaN"), ParseFailure.INVALID_JSON, id="nan"
        ),
        pytest.param(
            verdict_json(confidence=0.5).replace("0.5", "-Infinity"),
            ParseFailure.INVALID_JSON,
            id="inf",
        ),
        pytest.param(
            verdict_json(confidence=0.5).replace("0.5", "1e400"),
            ParseFailure.INVALID_JSON,
            id="overflow",
        ),
        pytest.param(
            '{"decision": "approve", "decision": "reject", "certainty": "likely", "confidence": 1}',
            ParseFailure.INVALID_JSON,
            id="duplicate-key",
        ),
        pytest.param("{" + '"a": [' * 5000, ParseFailure.INVALID_JSON, id="deep-unclosed"),
        pytest.param(
            '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", ParseFailure.INVALID_JSON, id="too-deep"
        ),
        pytest.param(verdict_json(decision="maybe"), ParseFailure.ENUM_INVALID, id="enum"),
        pytest.param(verdict_json(decision="APPROVE"), ParseFailure.ENUM_INVALID, id="enum-case"),
        pytest.param(verdict_json(certainty="sure"), ParseFailure.ENUM_INVALID, id="literal"),
        pytest.param(verdict_json(extra=1), ParseFailure.EXTRA_FIELDS, id="extra-top"),
        pytest.param(
            verdict_json(violations=[{"rule": "R", "span": [0, 1], "note": "", "why": "x"}]),
            ParseFailure.EXTRA_FIELDS,
            id="extra-nested",
        ),
        pytest.param(
            '{"decision": "approve", "confidence": 1}', ParseFailure.SCHEMA_INVALID, id="missing"
        ),
        pytest.param("{}", ParseFailure.SCHEMA_INVALID, id="empty-object"),
        pytest.param(
            verdict_json(confidence="0.9"), ParseFailure.SCHEMA_INVALID, id="number-as-string"
        ),
        pytest.param(
            verdict_json(confidence=True), ParseFailure.SCHEMA_INVALID, id="bool-as-number"
        ),
        pytest.param(
            verdict_json(violations=[{"rule": "R", "span": ["0", 1], "note": ""}]),
            ParseFailure.SCHEMA_INVALID,
            id="string-as-int",
        ),
        pytest.param(verdict_json(missing="x"), ParseFailure.SCHEMA_INVALID, id="string-as-list"),
        pytest.param(verdict_json(decision=None), ParseFailure.ENUM_INVALID, id="null-enum"),
    ],
)
def test_failure_reasons(text: str, reason: ParseFailure) -> None:
    with pytest.raises(ContractError) as caught:
        parse_structured(text, Verdict)
    assert caught.value.reason == reason
    assert caught.value.schema == "Verdict"


REJECT = verdict_json(decision="reject")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"{VALID}\n{REJECT}", id="approve-then-reject"),
        pytest.param(f"{REJECT}\n{VALID}", id="reject-then-approve"),
        pytest.param(f"{VALID}{VALID}", id="the-same-twice"),
        pytest.param(f"{verdict_json(decision='maybe')}\n{VALID}", id="invalid-then-valid"),
        pytest.param(f"Verdict: {VALID}\nOn second thought:\n{REJECT}", id="in-prose"),
        pytest.param(f"```json\n{VALID}\n```\n```json\n{REJECT}\n```", id="two-fences"),
        pytest.param(f'{VALID}\n{{"decision": "reject", "decision": "reject"}}', id="not-strict"),
        pytest.param(f'{{"decision": reject}}\n{VALID}', id="broken-then-whole"),
        pytest.param(f"{VALID}\n[{REJECT}]", id="second-in-an-array"),
    ],
)
def test_an_answer_holding_two_objects_says_two_things_and_is_refused(text: str) -> None:
    for whole in (False, True):
        with pytest.raises(ContractError) as caught:
            parse_structured(text, Verdict, whole=whole)
        expected = ParseFailure.EXTRA_TEXT if whole and "broken" not in text else None
        assert caught.value.reason in {ParseFailure.SEVERAL_OBJECTS, expected}


@given(
    st.sampled_from([VALID, REJECT]),
    st.sampled_from([VALID, REJECT]),
    st.text(alphabet=st.characters(exclude_characters="{}"), max_size=30),
)
def test_no_second_object_is_ever_ignored(first: str, second: str, between: str) -> None:
    with pytest.raises(ContractError) as caught:
        parse_structured(first + between + second, Verdict)
    assert caught.value.reason == ParseFailure.SEVERAL_OBJECTS


def test_detail_names_fields_without_echoing_values() -> None:
    with pytest.raises(ContractError) as caught:
        parse_structured(verdict_json(decision="secret-text", extra=1), Verdict)
    assert "decision" in caught.value.detail
    assert "secret-text" not in caught.value.detail


def test_enum_failure_wins_over_other_failures() -> None:
    with pytest.raises(ContractError) as caught:
        parse_structured('{"decision": "maybe", "extra": 1}', Verdict)
    assert caught.value.reason == ParseFailure.ENUM_INVALID


def test_parse_failure_values_are_pinned() -> None:
    assert [f.value for f in ParseFailure] == [
        "empty",
        "truncated",
        "content_filtered",
        "unexpected_tool_calls",
        "unfinished",
        "no_json",
        "not_object",
        "invalid_json",
        "enum_invalid",
        "extra_fields",
        "schema_invalid",
        "several_objects",
        "extra_text",
    ]


class TestClamped:
    @pytest.mark.parametrize(
        ("given", "kept"),
        [(0.5, 0.5), (0, 0.0), (1, 1.0), (1.7, 1.0), (-0.2, 0.0), (1e300, 1.0), (-5, 0.0)],
    )
    def test_clamps_finite_numbers(self, given: float, kept: float) -> None:
        value = parse_structured(verdict_json(confidence=given), Verdict).confidence
        assert value == kept
        assert type(value) is float

    @pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, True, "0.5", None])
    def test_rejects_non_numbers_even_in_python(self, bad: object) -> None:
        with pytest.raises(ValidationError):
            Verdict.model_validate(
                {"decision": "approve", "certainty": "likely", "confidence": bad}
            )

    @pytest.mark.parametrize(("lo", "hi"), [(1, 0), (math.nan, 1), (0, math.inf)])
    def test_bounds_must_be_finite_and_ordered(self, lo: float, hi: float) -> None:
        with pytest.raises(UsageError):
            Clamped(lo, hi)

    def test_only_for_float_fields(self) -> None:
        with pytest.raises(UsageError):

            class _Bad(_Strict):
                score: Annotated[str, Clamped(0, 1)]

    def test_range_appears_in_json_schema(self) -> None:
        schema = json_schema_format(Verdict).schema_
        assert (
            schema["properties"]["confidence"] | {"minimum": 0, "maximum": 1}
            == (schema["properties"]["confidence"])
        )

    def test_unclamped_out_of_range_fails(self) -> None:
        class Bounded(_Strict):
            score: float = Field(ge=0, le=1)

        with pytest.raises(ContractError) as caught:
            parse_structured('{"score": 2}', Bounded)
        assert caught.value.reason == ParseFailure.SCHEMA_INVALID


class TestSchemaFormat:
    def test_is_the_schema_the_parser_enforces(self) -> None:
        fmt = json_schema_format(Verdict, strict=True)
        assert fmt.name == "Verdict"
        assert fmt.strict is True
        assert fmt.schema_ == Verdict.model_json_schema()
        assert fmt.schema_["additionalProperties"] is False

    def test_returns_a_copy(self) -> None:
        json_schema_format(Verdict).schema_["properties"].clear()
        assert json_schema_format(Verdict).schema_ == Verdict.model_json_schema()

    @pytest.mark.parametrize("schema", [Lenient, LenientInside])
    def test_open_schemas_are_refused(self, schema: type[BaseModel]) -> None:
        with pytest.raises(UsageError):
            json_schema_format(schema)
        with pytest.raises(UsageError):
            parse_structured('{"decision": "approve"}', schema)


# --- properties -------------------------------------------------------------------------

violations = st.builds(
    Violation,
    rule=st.text(max_size=12),
    span=st.tuples(st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40)),
    note=st.text(max_size=40),
)
verdicts = st.builds(
    Verdict,
    decision=st.sampled_from(Decision),
    certainty=st.sampled_from(["certain", "likely", "uncertain"]),
    confidence=st.floats(0, 1),
    violations=st.lists(violations, max_size=3).map(tuple),
    missing=st.lists(st.text(max_size=10), max_size=3).map(tuple),
)
# Prose before the object holds no "{" (it would start another candidate object) and no
# "[" (with a "]" after, the whole text could be one JSON array).
leading_prose = st.text(st.characters(blacklist_characters="{["), max_size=40)
# Prose after it holds no "{" either: "{}" there is a second object, which the parser
# refuses by contract (several_objects); a fresh-clone run once drew exactly that.
trailing_prose = st.text(st.characters(blacklist_characters="{"), max_size=40)
fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(verdicts, leading_prose, trailing_prose, st.booleans(), st.booleans())
def test_valid_instances_round_trip_through_any_wrapping(
    verdict: Verdict, before: str, after: str, fenced: bool, pretty: bool
) -> None:
    body = verdict.model_dump_json(indent=2 if pretty else None)
    if fenced:
        body = f"```json\n{body}\n```"
    assert parse_structured(f"{before}{body}{after}", Verdict) == verdict


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["decision", "certainty", "confidence", "violations", "missing", "x"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=12,
)
arbitrary_answers = st.one_of(
    st.text(),
    st.text(alphabet='{}[]":,0123456789.eE-truefalsnNaI approve\\ \n`', max_size=60),
    st.tuples(st.text(max_size=20), json_values, st.text(max_size=20)).map(
        lambda t: f"{t[0]}{json.dumps(t[1])}{t[2]}"
    ),
)


@fast
@given(arbitrary_answers)
def test_arbitrary_text_parses_or_fails_with_a_contract_error(text: str) -> None:
    try:
        result = parse_structured(text, Verdict)
    except ContractError as exc:
        assert exc.reason in set(ParseFailure)
    else:
        assert isinstance(result, Verdict)
        assert 0 <= result.confidence <= 1


@fast
@given(verdicts, st.text(max_size=20).filter(lambda v: v not in set(Decision)))
def test_unknown_enum_values_never_parse(verdict: Verdict, bad: str) -> None:
    data = verdict.model_dump(mode="json") | {"decision": bad}
    with pytest.raises(ContractError) as caught:
        parse_structured(json.dumps(data), Verdict)
    assert caught.value.reason == ParseFailure.ENUM_INVALID


# --- complete_structured ------------------------------------------------------------------


class ScriptedCall:
    """A stand-in for the wrapped provider: replays queued answers or raises queued errors."""

    def __init__(self, *script: str | tuple[str, str | None] | Exception) -> None:
        self.script = deque(script)
        self.requests: list[ChatRequest] = []

    async def __call__(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        item = self.script.popleft()
        if isinstance(item, Exception):
            raise item
        text, finish = item if isinstance(item, tuple) else (item, "stop")
        return ChatResult(text=text, finish_reason=finish, latency_s=0.01, route="r", model="m")


REQUEST = ChatRequest(
    messages=(ChatMessage.system("Judge the reply."), ChatMessage.user("the reply")),
    response_format=json_schema_format(Verdict),
)


async def test_good_first_answer_takes_one_call() -> None:
    call = ScriptedCall(f"```json\n{VALID}\n```")
    result = await complete_structured(call, REQUEST, Verdict)
    assert isinstance(result, StructuredSuccess)
    assert result.ok is True
    assert result.value == EXPECTED
    assert result.attempts == 1
    assert result.text == f"```json\n{VALID}\n```"
    assert call.requests == [REQUEST]


async def test_bad_then_good_succeeds_on_the_retry() -> None:
    call = ScriptedCall(verdict_json(decision="maybe"), VALID)
    result = await complete_structured(call, REQUEST, Verdict)
    assert isinstance(result, StructuredSuccess)
    assert result.value == EXPECTED
    assert result.attempts == 2
    assert [c.text for c in result.calls] == [verdict_json(decision="maybe"), VALID]
    retry = call.requests[1]
    assert retry.messages[:2] == REQUEST.messages
    assert retry.messages[2] == ChatMessage(
        role="assistant", content=verdict_json(decision="maybe")
    )
    assert retry.messages[3].role == "user"
    assert "allowed values" in (retry.messages[3].content or "")
    assert retry.response_format == REQUEST.response_format


async def test_twice_bad_fails_with_the_last_reason() -> None:
    call = ScriptedCall("no idea", verdict_json(extra=1))
    result = await complete_structured(call, REQUEST, Verdict)
    assert isinstance(result, StructuredFailure)
    assert result.ok is False
    assert result.reason is ParseFailure.EXTRA_FIELDS
    assert result.attempts == 2
    assert not call.script


async def test_empty_answer_is_not_echoed_back() -> None:
    call = ScriptedCall("", VALID)
    await complete_structured(call, REQUEST, Verdict)
    assert [m.role for m in call.requests[1].messages] == ["system", "user", "user"]


async def test_truncated_answer_is_a_failure_even_if_it_parses() -> None:
    call = ScriptedCall((VALID, "length"), (VALID[:20], "length"))
    result = await complete_structured(call, REQUEST, Verdict)
    assert isinstance(result, StructuredFailure)
    assert result.reason is ParseFailure.TRUNCATED
    assert result.attempts == 2
    assert "shorter" in (call.requests[1].messages[-1].content or "")


@pytest.mark.parametrize(
    ("finish", "reason"),
    [
        ("content_filter", ParseFailure.CONTENT_FILTERED),
        ("tool_calls", ParseFailure.UNEXPECTED_TOOL_CALLS),
        (None, ParseFailure.UNFINISHED),
        ("function_call", ParseFailure.UNFINISHED),
        ("insufficient_system_resource", ParseFailure.UNFINISHED),
    ],
)
async def test_an_answer_that_did_not_stop_normally_fails_even_if_it_parses(
    finish: str | None, reason: ParseFailure
) -> None:
    call = ScriptedCall((VALID, finish), (VALID, finish))
    result = await complete_structured(call, REQUEST, Verdict)
    assert isinstance(result, StructuredFailure)
    assert result.reason is reason
    assert result.finish_reason == finish
    assert repr(finish) in result.error.detail
    assert result.attempts == 2


async def test_a_filtered_answer_is_retried_and_a_normal_stop_then_succeeds() -> None:
    call = ScriptedCall((VALID, "content_filter"), VALID)
    result = await complete_structured(call, REQUEST, Verdict)
    assert isinstance(result, StructuredSuccess)
    assert result.attempts == 2
    assert "content filter" in (call.requests[1].messages[-1].content or "")


def _result(finish: str | None, tool_calls: int) -> ChatResult:
    calls = tuple(ToolCall(id=f"c{i}", name="look", arguments="{}") for i in range(tool_calls))
    return ChatResult(
        text=VALID, finish_reason=finish, tool_calls=calls, latency_s=0.0, route="r", model="m"
    )


@pytest.mark.parametrize(
    ("finish", "tool_calls", "tools_asked", "expected"),
    [
        ("stop", 0, False, None),
        ("stop", 0, True, None),
        ("tool_calls", 1, True, None),
        ("stop", 1, True, None),
        ("length", 0, False, ParseFailure.TRUNCATED),
        ("length", 1, True, ParseFailure.TRUNCATED),
        ("content_filter", 0, False, ParseFailure.CONTENT_FILTERED),
        ("content_filter", 1, True, ParseFailure.CONTENT_FILTERED),
        ("tool_calls", 0, False, ParseFailure.UNEXPECTED_TOOL_CALLS),
        ("tool_calls", 1, False, ParseFailure.UNEXPECTED_TOOL_CALLS),
        ("stop", 1, False, ParseFailure.UNEXPECTED_TOOL_CALLS),
        ("tool_calls", 0, True, ParseFailure.UNFINISHED),
        (None, 0, False, ParseFailure.UNFINISHED),
        (None, 1, True, ParseFailure.UNFINISHED),
        ("", 0, False, ParseFailure.UNFINISHED),
        ("STOP", 0, False, ParseFailure.UNFINISHED),
    ],
)
def test_finish_failure_is_the_one_rule(
    finish: str | None, tool_calls: int, tools_asked: bool, expected: ParseFailure | None
) -> None:
    result = _result(finish, tool_calls)
    assert finish_failure(result, tools_asked=tools_asked) is expected
    if expected is None:
        check_finished(result, "Draft", tools_asked=tools_asked)
    else:
        with pytest.raises(ContractError) as caught:
            check_finished(result, "Draft", tools_asked=tools_asked)
        assert (caught.value.schema, caught.value.reason) == ("Draft", expected)
        assert f"finish_reason is {finish!r}" in caught.value.detail


@given(
    finish=st.one_of(st.none(), st.sampled_from(["stop", "tool_calls", "length"]), st.text()),
    tool_calls=st.integers(0, 2),
    tools_asked=st.booleans(),
)
def test_only_a_normal_stop_completes(
    finish: str | None, tool_calls: int, tools_asked: bool
) -> None:
    normal = finish == "stop" and (tools_asked or tool_calls == 0)
    normal = normal or (tools_asked and finish == "tool_calls" and tool_calls > 0)
    result = _result(finish, tool_calls)
    assert (finish_failure(result, tools_asked=tools_asked) is None) is normal


@pytest.mark.parametrize("retries", [0, 2])
async def test_retries_is_the_number_of_extra_calls(retries: int) -> None:
    call = ScriptedCall(*(["nope"] * (retries + 1)))
    result = await complete_structured(call, REQUEST, Verdict, retries=retries)
    assert isinstance(result, StructuredFailure)
    assert result.attempts == retries + 1
    # Every retry starts from the original request plus only the latest bad answer.
    assert all(len(r.messages) == 4 for r in call.requests[1:])


async def test_route_errors_propagate() -> None:
    call = ScriptedCall(RouteTimeout("r", 1.0))
    with pytest.raises(RouteTimeout):
        await complete_structured(call, REQUEST, Verdict)


async def test_route_error_on_the_retry_propagates() -> None:
    call = ScriptedCall("nope", RouteTimeout("r", 1.0))
    with pytest.raises(RouteTimeout):
        await complete_structured(call, REQUEST, Verdict)


async def test_misuse_is_refused_before_any_call() -> None:
    call = ScriptedCall()
    with pytest.raises(UsageError):
        await complete_structured(call, REQUEST, Verdict, retries=-1)
    with pytest.raises(UsageError):
        await complete_structured(call, REQUEST, Lenient)
    assert call.requests == []


ONE_BAD_ANSWER_PER_REASON: dict[ParseFailure, str | tuple[str, str | None]] = {
    ParseFailure.EMPTY: "",
    ParseFailure.TRUNCATED: (VALID, "length"),
    ParseFailure.CONTENT_FILTERED: (VALID, "content_filter"),
    ParseFailure.UNEXPECTED_TOOL_CALLS: (VALID, "tool_calls"),
    ParseFailure.UNFINISHED: (VALID, None),
    ParseFailure.NO_JSON: "approve",
    ParseFailure.NOT_OBJECT: '["approve"]',
    ParseFailure.INVALID_JSON: VALID[:-1],
    ParseFailure.ENUM_INVALID: verdict_json(decision="ok"),
    ParseFailure.EXTRA_FIELDS: verdict_json(extra=1),
    ParseFailure.SCHEMA_INVALID: "{}",
    ParseFailure.SEVERAL_OBJECTS: f"{VALID}\n{verdict_json(decision='reject')}",
}


# extra_text comes only from parse_structured(whole=True), which no retried call uses.
@pytest.mark.parametrize("reason", [r for r in ParseFailure if r is not ParseFailure.EXTRA_TEXT])
async def test_every_failure_gets_a_retry_note(reason: ParseFailure) -> None:
    bad = ONE_BAD_ANSWER_PER_REASON[reason]
    call = ScriptedCall(bad, bad)
    result = await complete_structured(call, REQUEST, Verdict)
    assert isinstance(result, StructuredFailure)
    assert result.reason is reason
    note = call.requests[1].messages[-1]
    assert note.role == "user"
    assert (note.content or "").startswith("Your previous answer could not be used")
