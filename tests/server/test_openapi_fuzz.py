"""A request that conforms to ``/openapi.json`` is never refused as malformed.

For each operation of the app's own document, hypothesis draws schema-valid requests
(path and query parameters, JSON body) from the document itself
(:mod:`tests.helpers.schema_strategies`) and sends them to the real app (default config:
offline model routes, the test's SQLite store) with an admin key. Every answer must be
below 500, a status the operation declares, and never a 400 or 422 for what the schema
allows, except a rule that JSON Schema cannot express, which the operation's description
documents (:data:`CROSS_FIELD`). Other declared statuses (404, 409, ...) stand for state the
walk cannot know.

``POST /v1/check/stream`` is left out: its body is NDJSON the document describes in words
(tests/server/test_check_stream_fuzz.py draws it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from foureyes.config import Config
from foureyes.server.app import create_app
from tests.helpers.schema_strategies import conforms, values
from tests.helpers.server import AppCaller, app_caller
from tests.server._support import ADMIN_KEY, KEYS_ENV, bearer, keyed

NDJSON_ONLY = {"/v1/check/stream"}
"""Operations whose body the document does not describe as a schema."""

_MESSAGES = r"messages(\.\d+(\.tool_call_id|\.tool_calls(\.\d+)?)?)?"


def _invalid_request(params: str) -> Callable[[dict[str, Any]], bool]:
    def refused(error: dict[str, Any]) -> bool:
        param = error.get("param") or ""
        if error.get("code") != "invalid_request" or not re.fullmatch(params, param):
            return False
        if re.search(r"tool_calls\.\d+$", param):  # a call's name is the schema's to say
            return any(word in error["message"] for word in ("arguments_not_json", "bad_id"))
        return True

    return refused


def _not_a_session(error: dict[str, Any]) -> bool:
    message = error.get("message")
    return error.get("code") is None and isinstance(message, dict) and "reason" in message


CROSS_FIELD: dict[str, tuple[Callable[[dict[str, Any]], bool], list[str]]] = {
    # The last message is the user's, with text; support mode takes no tool turns; only an
    # assistant makes tool calls, and a tool message answers one; arguments are strict JSON.
    "/v1/chat/completions": (
        _invalid_request(_MESSAGES),
        ["``messages``", "``messages.<i>``", "``messages.<i>.tool_call_id``"],
    ),
    "/v1/check": (
        _invalid_request(rf"{_MESSAGES}|draft\.tool_calls\.\d+"),
        ["``messages``", "``messages.<i>.tool_call_id``", "``draft.tool_calls.<j>``"],
    ),
    # The free-form messages or events are a session of their format.
    "/v1/review": (_not_a_session, ['``{"format", "reason", "detail"}``']),
    "/v1/review/deliberate": (_not_a_session, ['``{"format", "reason", "detail"}``']),
}
"""Per operation, the 422s of the rules JSON Schema cannot express, and the words of the
operation's description that document them (checked below)."""


def _keeping_rules(body: dict[str, Any]) -> dict[str, Any]:
    """A gateway body made to keep the rules :data:`CROSS_FIELD` lists (support mode).

    No tool turns, the last message the user's with text, a draft's calls with strict JSON
    arguments and ids of their own: so the walk reaches triage and the gate.
    """
    *earlier, last = body["messages"]
    turns = [m for m in earlier if m["role"] != "tool" and not m.get("tool_calls")]
    content = last.get("content")
    text = content if isinstance(content, str) and content.strip() else "Hello"
    extra = {k: v for k, v in last.items() if k not in ("role", "content", "tool_calls")}
    kept = body | {"messages": [*turns, extra | {"role": "user", "content": text}]}
    if isinstance(body.get("draft"), dict):  # a draft of text alone may be a string
        calls = [
            call | {"id": f"call_{i}", "function": call["function"] | {"arguments": "{}"}}
            for i, call in enumerate(body["draft"].get("tool_calls", ()))
        ]
        kept["draft"] = body["draft"] | ({"tool_calls": calls} if calls else {})
    return kept


KEEPING_RULES = {"/v1/chat/completions", "/v1/check"}
"""Operations half of whose drawn bodies are made to keep their rules (:func:`_keeping_rules`)."""

_DOC = create_app(Config(), {}).openapi()
OPERATIONS = [
    (method.upper(), path)
    for path, item in _DOC["paths"].items()
    for method in item
    if path not in NDJSON_ONLY
]


@pytest.fixture
def caller() -> Iterator[AppCaller]:
    """The real app, keyed, with limits no walk reaches, started once for all examples."""
    config = keyed(rate_per_minute=10_000_000, burst=1_000_000)
    with app_caller(create_app(config, KEYS_ENV)) as started:
        yield started


def _wire(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def requests(doc: dict[str, Any], method: str, path: str) -> st.SearchStrategy[dict[str, Any]]:
    """Schema-valid requests of one operation: its URL, query and JSON body."""
    operation = doc["paths"][path][method.lower()]
    in_path: dict[str, st.SearchStrategy[Any]] = {}
    must: dict[str, st.SearchStrategy[Any]] = {}
    may: dict[str, st.SearchStrategy[Any]] = {}
    for param in operation.get("parameters", []):
        if param["in"] == "path":
            in_path[param["name"]] = values(doc, param["schema"])
        elif param["in"] == "query":
            target = must if param.get("required") else may
            target[param["name"]] = values(doc, param["schema"])
    body: st.SearchStrategy[Any] = st.just(None)
    if "requestBody" in operation:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        body = values(doc, schema)
        if path in KEEPING_RULES:  # still schema-valid: checked again
            kept = st.tuples(body, st.booleans()).map(
                lambda b: _keeping_rules(b[0]) if b[1] else b[0]
            )
            body = kept.filter(conforms(doc, schema))
        if not operation["requestBody"].get("required"):
            body = st.none() | body

    def build(parts: tuple[dict[str, Any], dict[str, Any], Any]) -> dict[str, Any]:
        segments, query, content = parts
        url = path
        for name, value in segments.items():
            url = url.replace("{" + name + "}", quote(_wire(value), safe=""))
        params = {k: _wire(v) for k, v in query.items() if v is not None}  # null: left out
        return {"url": url, "params": params, "body": content}

    return st.tuples(
        st.fixed_dictionaries(in_path), st.fixed_dictionaries(must, optional=may), body
    ).map(build)


_STRATEGIES: dict[tuple[str, str], st.SearchStrategy[dict[str, Any]]] = {}


def _undeclared(
    doc: dict[str, Any], method: str, path: str, response: httpx.Response
) -> str | None:
    """Why ``response`` is not an answer the document lets a schema-valid request get."""
    status = response.status_code
    declared = doc["paths"][path][method.lower()]["responses"]
    if status >= 500:
        return f"a server error {status}"
    if str(status) not in declared:
        return f"{status}, which is not declared ({sorted(declared)})"
    if status not in (400, 422):
        return None
    error = response.json().get("error", {})
    if status == 422 and path in CROSS_FIELD and CROSS_FIELD[path][0](error):
        return None
    return f"{status} for a schema-valid request: {error}"


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
@settings(
    max_examples=80,
    deadline=None,
    # One app serves every example, as a client's server would.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_schema_valid_request_is_never_refused_as_malformed(
    caller: AppCaller, method: str, path: str, data: st.DataObject
) -> None:
    doc = _DOC
    key = (method, path)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = requests(doc, method, path)
    request = data.draw(_STRATEGIES[key], label="request")
    options: dict[str, Any] = {"params": request["params"], "headers": bearer(ADMIN_KEY)}
    if request["body"] is not None:
        options["content"] = json.dumps(request["body"], allow_nan=False).encode()
        options["headers"] = options["headers"] | {"content-type": "application/json"}

    response = caller.call(method, request["url"], **options)
    event(f"status {response.status_code}")

    problem = _undeclared(doc, method, path, response)
    assert problem is None, f"{method} {request['url']} {request['params']}: {problem}"


def test_the_walk_covers_the_document_the_app_serves(caller: AppCaller) -> None:
    served = caller.call("GET", "/openapi.json").json()

    assert served == _DOC
    walked = {path for _, path in OPERATIONS}
    assert walked | NDJSON_ONLY == set(served["paths"])


@pytest.mark.parametrize("path", sorted(CROSS_FIELD))
def test_each_rule_the_schema_cannot_express_is_in_the_operations_description(path: str) -> None:
    operation = _DOC["paths"][path]["post"]
    _, words = CROSS_FIELD[path]

    assert "the request schema cannot express" in operation["description"]
    assert all(word in operation["description"] for word in words), (path, words)
    assert "422" in operation["responses"]
