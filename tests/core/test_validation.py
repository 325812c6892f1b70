"""The one translator of pydantic's validation errors, on the models users reach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from foureyes.config import Config, load_config
from foureyes.core.errors import ConfigError
from foureyes.core.validation import ValidationProblem, explain_errors
from foureyes.wire.chat import ChatCompletionRequest

PYDANTIC_WORDS = (
    "Value error,",
    "valid tuple",
    "Input should",
    "String should",
    "Extra inputs",
    "Field required",
    "[A-Z]",
    "list[TextContent]",
)
"""Words of pydantic's (and a raw regex, and a union's member tags) no message may hold."""


def problems_of(model: type[BaseModel], data: Any) -> list[ValidationProblem]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return explain_errors(caught.value, model)


def config_problems(tmp_path: Path, toml: str) -> list[str]:
    path = tmp_path / "foureyes.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    return list(caught.value.problems)


def chat(*parts: Any, **foureyes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "foureyes-support",
        "messages": [{"role": "user", "content": list(parts) if parts else "hi"}],
    }
    return body | ({"foureyes": foureyes} if foureyes else {})


def test_a_misspelt_config_key_gets_the_key_it_most_likely_means(tmp_path: Path) -> None:
    assert config_problems(tmp_path, '[gate]\nregoin = "CN"\n') == [
        "unknown key 'gate.regoin'; did you mean 'region'?"
    ]
    # Nothing close: the key alone.
    assert config_problems(tmp_path, "[gate]\nzzzzzz = 1\n") == ["unknown key 'gate.zzzzzz'"]


def test_a_bad_region_says_what_a_region_is_not_its_regex(tmp_path: Path) -> None:
    [problem] = config_problems(tmp_path, '[gate]\nregion = "china"\n')
    assert problem.startswith("gate.region: expected a region code: two capital letters")
    assert "ISO 3166-1 alpha-2" in problem and problem.endswith("got 'china'")
    assert "[A-Z]" not in problem and "pattern" not in problem
    [lower] = config_problems(tmp_path, '[gate]\nregion = "cn"\n')
    assert lower.endswith("got 'cn'; did you mean 'CN'?")


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[server]\nmode = "gaurd"\n', "server.mode: expected 'support' or 'guard', got 'gaurd'"),
        ('[gate]\nmax_calls = "many"\n', "gate.max_calls: expected a whole number, got 'many'"),
        ("[gate]\nmax_revisions = -1\n", "gate.max_revisions: expected a number of at least 0"),
        ('[gate]\ntools_allow = "x"\n', "gate.tools_allow: expected a list, got 'x'"),
        ('gate = "x"\n', "gate: expected a table of keys and values, got 'x'"),
        ('[routes.x]\nkind = "openai"\n', "routes.x: base_url is required for kind 'openai'"),
    ],
)
def test_config_problems_say_what_is_expected_and_what_was_given(
    tmp_path: Path, toml: str, expected: str
) -> None:
    [problem] = config_problems(tmp_path, toml)
    assert problem.startswith(expected), problem
    assert not any(word in problem for word in PYDANTIC_WORDS), problem


def test_a_misspelt_value_gets_the_allowed_one_it_most_likely_means(tmp_path: Path) -> None:
    [problem] = config_problems(tmp_path, '[server]\nmode = "gaurd"\n')
    assert problem.endswith("got 'gaurd'; did you mean 'guard'?")


def test_a_password_in_a_url_is_not_said_back() -> None:
    [problem] = problems_of(Config, {"server": {"mode": "https://u:hunter2@h/x"}})
    assert "hunter2" not in problem.message() and "'https://***@h/x'" in problem.message()


def test_an_image_content_part_is_one_readable_problem_not_a_union_dump() -> None:
    problems = problems_of(ChatCompletionRequest, chat({"type": "image_url", "image_url": {}}))
    assert [p.message() for p in problems] == [
        "messages.0.content.0.type: expected 'text', got 'image_url'"
    ]
    # Without the model the union's member tags are still told from the fields.
    [alone] = explain_errors(
        _raised(ChatCompletionRequest, chat({"type": "image_url", "image_url": {}}))
    )
    assert alone == problems[0]
    # Content of neither form: one problem naming both.
    body = chat()
    body["messages"][0]["content"] = 5
    [neither] = problems_of(ChatCompletionRequest, body)
    assert neither.path == "messages.0.content"
    assert (
        neither.message(echo=False)
        == "messages.0.content: expected a string or a list, got a whole number"
    )


def test_the_library_and_the_api_do_not_echo_values() -> None:
    [region] = problems_of(ChatCompletionRequest, chat(region="my-secret-words"))
    assert "my-secret-words" not in region.message(echo=False)
    assert region.message(echo=False).endswith("got a string")
    [key] = problems_of(ChatCompletionRequest, chat(conversaton_id="x"))
    assert (
        key.message(echo=False)
        == "unknown key 'foureyes.conversaton_id'; did you mean 'conversation_id'?"
    )


def _raised(model: type[BaseModel], data: Any) -> ValidationError:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return exc
    raise AssertionError("validated")


_CONFIG_KEYS = st.sampled_from(
    [
        ("gate", "region"),
        ("gate", "max_calls"),
        ("gate", "deadline_s"),
        ("gate", "tools_allow"),
        ("gate", "regoin"),
        ("server", "mode"),
        ("store", "url"),
        ("routes", "x"),
        ("privacy", "unknowns_key_env"),
        ("risk", "reserved_share"),
    ]
)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "kind", "type"]), st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(key=_CONFIG_KEYS, value=_VALUES)
def test_no_config_problem_speaks_pydantic(key: tuple[str, str], value: Any) -> None:
    section, name = key
    try:
        Config.model_validate({section: {name: value}})
    except ValidationError as exc:
        problems = explain_errors(exc, Config)
    else:
        return
    assert problems
    for problem in problems:
        for echo in (True, False):
            message = problem.message(echo=echo)
            assert not any(word in message for word in PYDANTIC_WORDS), message
            assert message.startswith((f"{section}", f"unknown key '{section}")), message


_PARTS = st.one_of(
    _VALUES,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image_url", "input_audio", "file"])},
        optional={"text": _VALUES, "image_url": st.just({"url": "https://x/y.png"})},
    ),
)


@settings(max_examples=60, deadline=None)
@given(content=st.one_of(_VALUES, st.lists(_PARTS, min_size=1, max_size=3)))
def test_no_chat_request_problem_speaks_pydantic(content: Any) -> None:
    body = chat()
    body["messages"][0]["content"] = content
    try:
        ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        problems = explain_errors(exc, ChatCompletionRequest)
    else:
        return
    assert problems
    for problem in problems:
        message = problem.message(echo=False)
        assert not any(word in message for word in PYDANTIC_WORDS), message
        assert message.startswith("messages.0.content"), message
