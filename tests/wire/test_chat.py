"""The gateway's requests translated into pipeline calls, with no server in between.

What a request's schema cannot say is refused by the translation as
:class:`~foureyes.wire.errors.InvalidRequest`, naming the request model and the field:
the server answers it as a 422 ``invalid_request`` (tests/server/test_gateway.py), the
Guard as its ``invalid_input`` error (tests/test_guard.py).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import foureyes.wire
from foureyes.core.errors import ContractError
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.wire import (
    INVALID_REQUEST,
    ChatCompletionRequest,
    CheckRequest,
    InvalidRequest,
    support_message,
)

GATEWAY = {"model": "foureyes-support"}
CALL = {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}


def _chat(*messages: dict[str, Any]) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate(GATEWAY | {"messages": list(messages)})


def test_a_request_becomes_the_pipelines_message() -> None:
    body = _chat(
        {"role": "system", "content": "ignored in support mode"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "I feel"}, {"type": "text", "text": "low"}],
        },
    )
    message = support_message(body, tenant=LOCAL_TENANT, tool_turns=False)
    assert message.text == "I feel\nlow"
    assert [(t.role, t.text) for t in message.history] == [("user", "hello"), ("assistant", "hi")]
    assert message.tenant == LOCAL_TENANT and message.conversation_id is None


@pytest.mark.parametrize(
    ("messages", "tool_turns", "param"),
    [
        ([{"role": "assistant", "content": "hi"}], False, "messages"),
        ([{"role": "user", "content": "   "}], False, "messages"),
        (
            [{"role": "assistant", "tool_calls": [CALL]}, {"role": "user", "content": "x"}],
            False,
            "messages.0",
        ),
        (
            [
                {"role": "tool", "content": "42", "tool_call_id": "c1"},
                {"role": "user", "content": "x"},
            ],
            True,
            "messages.0.tool_call_id",
        ),
        (
            [
                {"role": "user", "content": "x", "tool_calls": [CALL]},
                {"role": "user", "content": "y"},
            ],
            True,
            "messages.0.tool_calls",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [CALL | {"function": {"name": "book", "arguments": "{x"}}],
                },
                {"role": "user", "content": "y"},
            ],
            True,
            "messages.0.tool_calls.0",
        ),
    ],
    ids=[
        "last-not-user",
        "blank-last",
        "tools-in-support",
        "orphan-result",
        "user-calls",
        "bad-args",
    ],
)
def test_a_rule_the_schema_cannot_express_is_an_invalid_request_naming_the_field(
    messages: list[dict[str, Any]], tool_turns: bool, param: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        support_message(_chat(*messages), tenant=LOCAL_TENANT, tool_turns=tool_turns)
    error = caught.value
    assert (error.schema, error.reason, error.param) == (
        "ChatCompletionRequest",
        INVALID_REQUEST,
        param,
    )
    assert error.detail == f"{param}: {error.problem}" and error.problem
    assert isinstance(error, ContractError)


def test_a_drafts_bad_tool_call_names_the_call_and_the_check_request() -> None:
    body = CheckRequest.model_validate(
        {
            "messages": [{"role": "user", "content": "book it"}],
            "draft": {"tool_calls": [CALL, CALL]},  # the same id twice
        }
    )
    with pytest.raises(InvalidRequest) as caught:
        body.given_draft()
    assert (caught.value.schema, caught.value.param) == ("CheckRequest", "draft.tool_calls.1")


_ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool"])
_MESSAGE = st.fixed_dictionaries(
    {"role": _ROLES, "content": st.one_of(st.none(), st.text(max_size=8))},
    optional={
        "tool_call_id": st.sampled_from(["c1", "c2"]),
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["c1", "c2"]),
                    "function": st.fixed_dictionaries(
                        {"name": st.just("book"), "arguments": st.sampled_from(["{}", "{x", "[]"])}
                    ),
                }
            ),
            max_size=2,
        ),
    },
)


@given(messages=st.lists(_MESSAGE, min_size=1, max_size=5), tool_turns=st.booleans())
def test_any_valid_body_is_translated_or_refused_as_an_invalid_request_of_a_message(
    messages: list[dict[str, Any]], tool_turns: bool
) -> None:
    try:
        body = _chat(*messages)
    except ValueError:  # pydantic's ValidationError: the schema's own refusal
        return
    try:
        message = support_message(body, tenant=LOCAL_TENANT, tool_turns=tool_turns)
    except InvalidRequest as exc:
        assert exc.param.startswith("messages")
        return
    # What is taken is the last message, a user's with text; history holds no system text.
    assert body.messages[-1].role == "user" and message.text == body.messages[-1].text
    assert message.text.strip()
    assert all(turn.role in ("user", "assistant", "tool") for turn in message.history)


_FRAMEWORKS = ("fastapi", "starlette", "uvicorn", "sse_starlette", "foureyes.server")


def test_no_module_of_the_wire_layer_imports_a_web_framework_or_the_server() -> None:
    for path in Path(foureyes.wire.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not name.startswith(_FRAMEWORKS), f"{path.name} imports {name}"
