"""The OpenAPI document says what the server does: a hand-rolled schemathesis-style walk.

For every operation of ``/openapi.json`` the walk sends the bad inputs a fuzzer would
(no key, the wrong scope, an oversized body, malformed and mistyped JSON, bad text,
values outside each parameter's schema) and asserts that every answer's status is one
the document declares for that operation, with the declared error body.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from foureyes.server.app import create_app
from foureyes.server.metrics import METRICS_CONTENT_TYPE
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, keyed

MAX_BODY = 1024
# The facts endpoints answer their own problems in their own body ({"ok", "error",
# "problems"}), not the OpenAI-style error this walk checks; their body schema is checked
# in tests/server/test_facts_api.py.
SKIPPED = ("/v1/facts/",)
JSON = {"content-type": "application/json"}


def _service() -> Any:
    return keyed(rate_per_minute=10_000_000, burst=1_000_000, max_body_bytes=MAX_BODY)


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _bad_values(schema: dict[str, Any]) -> list[str]:
    """Query or path values outside ``schema``, as strings on the wire."""
    if "anyOf" in schema:
        schema = next(s for s in schema["anyOf"] if s.get("type") != "null")
    kind = schema.get("type")
    values = ["x\x00y"]  # a NUL: never text any field takes
    if kind == "integer":
        values += ["abc", "1.5", str(10**30), str(schema.get("minimum", 0) - 1)]
        if "maximum" in schema:
            values.append(str(schema["maximum"] + 1))
    elif "enum" in schema:
        values.append("no-such-value")
    elif schema.get("format") == "date-time":
        values += ["0.5", "1700000000", "yesterday", "2026-11-30T12:00:00"]
    elif "pattern" in schema and not re.search(schema["pattern"], "!!"):
        values.append("!!")  # a text's own pattern (TEXT_PATTERN) takes it: the NUL is bad
    if schema.get("maxLength"):
        values.append("y" * (schema["maxLength"] + 1))
    return values


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path, item in doc["paths"].items():
        if path.startswith(SKIPPED):
            continue
        for method, operation in item.items():
            found.append((method.upper(), path, operation))
    return found


def _url(path: str, operation: dict[str, Any], doc: dict[str, Any], **given: str) -> str:
    for param in operation.get("parameters", []):
        if param["in"] == "path":
            schema = _resolve(doc, param["schema"])
            value = given.get(param["name"]) or (schema.get("enum") or ["x"])[0]
            path = path.replace("{" + param["name"] + "}", value)
    return path


def _string_properties(doc: dict[str, Any], operation: dict[str, Any]) -> list[str]:
    # JSON, or NDJSON whose lines the document describes in words (/v1/check/stream).
    [content] = operation["requestBody"]["content"].values()
    schema = _resolve(doc, content["schema"])
    names = []
    for name, prop in schema.get("properties", {}).items():
        options = prop.get("anyOf", [prop])
        if any(option.get("type") == "string" for option in options):
            names.append(name)
    return names


async def _walk(client: httpx.AsyncClient, doc: dict[str, Any]) -> list[tuple[str, str, int]]:
    """Every (operation, what was sent, status) of the walk."""
    answers: list[tuple[str, str, int, httpx.Response]] = []
    admin = bearer(ADMIN_KEY)

    async def send(
        label: str, method: str, url: str, what: str, headers: dict[str, str], **kw: Any
    ) -> None:
        response = await client.request(method, url, headers=headers, **kw)
        answers.append((label, what, response.status_code, response))

    for method, path, operation in _operations(doc):
        label = f"{method} {path}"
        url = _url(path, operation, doc)
        await send(label, method, url, "no key", {})
        await send(label, method, url, "client key", bearer(CLIENT_KEY))
        await send(label, method, url, "admin key, nothing else", admin)
        await send(label, method, url, "oversized", admin | JSON, content=b" " * (MAX_BODY + 1))
        for param in operation.get("parameters", []):
            schema = _resolve(doc, param["schema"])
            for value in _bad_values(schema):
                what = f"{param['name']}={value!r}"
                if param["in"] == "query":
                    await send(label, method, url, what, admin, params={param["name"]: value})
                elif param["in"] == "path":
                    bad = _url(path, operation, doc, **{param["name"]: value})
                    await send(label, method, bad.replace("\x00", "%00"), what, admin)
        if "requestBody" not in operation:
            continue
        bodies: dict[str, bytes] = {
            "malformed JSON": b'{"a": ',
            "not UTF-8": b'{"a": "\xff"}',
            "not an object": b"[]",
            "empty object": b"{}",
        }
        for name in _string_properties(doc, operation):
            bodies[f"{name}: a number"] = json.dumps({name: 12345}).encode()
            bodies[f"{name}: a surrogate"] = json.dumps({name: "a\ud83d"}).encode()
            bodies[f"{name}: a NUL"] = json.dumps({name: "a\x00"}).encode()
        for what, body in bodies.items():
            await send(label, method, url, what, admin | JSON, content=body)

    problems = []
    for label, what, status, response in answers:
        declared = _declared(doc, label)
        if str(status) not in declared:
            problems.append(f"{label} [{what}] answered {status}, declared {sorted(declared)}")
        elif status >= 400 and label != "GET /healthz":
            error = response.json()["error"]
            assert {"message", "type", "code", "param"} <= set(error), (label, what)
    assert not problems, "\n".join(problems)
    return [(label, what, status) for label, what, status, _ in answers]


def _declared(doc: dict[str, Any], label: str) -> dict[str, Any]:
    method, path = label.split(" ", 1)
    responses: dict[str, Any] = doc["paths"][path][method.lower()]["responses"]
    return responses


async def test_every_answer_to_bad_input_is_a_status_the_document_declares() -> None:
    async with app_client(create_app(_service(), KEYS_ENV)) as client:
        doc = (await client.get("/openapi.json")).json()
        answers = await _walk(client, doc)

    statuses = {status for _, _, status in answers}
    # The walk reached each kind of refusal, so the check above covered them all.
    assert {400, 401, 403, 404, 413, 422} <= statuses
    assert not [a for a in answers if a[2] >= 500]
    by_what = {(label, what): status for label, what, status in answers}
    assert by_what[("GET /v1/traces", "until='0.5'")] == 422
    assert by_what[("POST /v1/chat/completions", "user: a surrogate")] == 422
    assert by_what[("GET /metrics", "client key")] == 403


async def test_every_error_status_uses_the_error_body_and_names_its_codes() -> None:
    async with app_client(create_app(_service(), KEYS_ENV)) as client:
        doc = (await client.get("/openapi.json")).json()

    for method, path, operation in _operations(doc):
        for status, response in operation["responses"].items():
            if not status.startswith(("4", "5")) or path == "/healthz" and status == "503":
                continue
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
            assert re.search(r"`[a-z_]+`", response["description"]), (method, path, status)
        keyed_route = path not in ("/healthz", "/openapi.json")
        if keyed_route:
            assert {"401", "413", "429", "503"} <= set(operation["responses"]), (method, path)
        if "requestBody" in operation:
            assert {"400", "408", "413", "422"} <= set(operation["responses"]), (method, path)


async def test_metrics_are_declared_with_the_media_type_they_are_served_with() -> None:
    async with app_client(create_app(_service(), KEYS_ENV)) as client:
        doc = (await client.get("/openapi.json")).json()
        response = await client.get("/metrics", headers=bearer(ADMIN_KEY))

    content = doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(content) == [METRICS_CONTENT_TYPE]
    assert METRICS_CONTENT_TYPE.startswith("text/plain; version=0.0.4")
    assert response.headers["content-type"] == METRICS_CONTENT_TYPE
    assert b"foureyes_http_requests_total" in response.content


# --- text: a request that conforms to the document holds no NUL --------------------------


def _strings(doc: dict[str, Any], schema: Any, where: str, seen: set[str]) -> list[tuple]:
    """Every (place, string schema) a request schema describes, keys of free objects too."""
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        return _strings(doc, _resolve(doc, schema), name, seen | {name})
    found: list[tuple] = [(where, schema)] if schema.get("type") == "string" else []
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, ()):
            found += _strings(doc, branch, where, seen)
    for name, sub in schema.get("properties", {}).items():
        found += _strings(doc, sub, f"{where}.{name}", seen)
    for key in ("items", "additionalProperties"):
        found += _strings(doc, schema.get(key), f"{where}[]", seen)
    if "propertyNames" in schema:
        found.append((f"{where}<key>", {"type": "string", **schema["propertyNames"]}))
    return found


TAKEN_AS_IS = {
    "ChatCompletionRequest.tool_choice",  # passed on to the team's model, never checked
    "post /v1/check/stream body",  # NDJSON, whose lines are checked as they are read
}


def _refuses_nul(schema: dict[str, Any]) -> bool:
    if "enum" in schema or "const" in schema or "format" in schema:
        return True  # a NUL is none of these values
    patterns = [schema.get("pattern")] + [s.get("pattern") for s in schema.get("allOf", ())]
    return any(p is not None and not re.search(p, "a\x00b") for p in patterns)


async def test_every_text_a_request_may_carry_refuses_a_nul_in_the_document() -> None:
    async with app_client(create_app(_service(), KEYS_ENV)) as client:
        doc = (await client.get("/openapi.json")).json()

    places = []
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            for param in operation.get("parameters", ()):
                places += _strings(doc, param["schema"], f"{method} {path} {param['name']}", set())
            for content in operation.get("requestBody", {}).get("content", {}).values():
                places += _strings(doc, content["schema"], f"{method} {path} body", set())
    assert len(places) > 50
    refused = [
        where for where, schema in places if not _refuses_nul(schema) and where not in TAKEN_AS_IS
    ]
    assert refused == [], "\n".join(refused)
    # Free-form members are the same recursive value, whose strings and keys refuse a NUL.
    value = doc["components"]["schemas"]["TextJsonValue"]
    assert all(_refuses_nul(s) for _, s in _strings(doc, value, "TextJsonValue", set()))


# --- the review body: the schema refuses what the handler refuses ------------------------


def _allows(doc: dict[str, Any], schema: dict[str, Any], value: Any) -> bool:
    """A small JSON Schema check: the keywords the review body's schema uses."""
    schema = _resolve(doc, schema)
    if "oneOf" in schema and sum(_allows(doc, s, value) for s in schema["oneOf"]) != 1:
        return False
    if "anyOf" in schema and not any(_allows(doc, s, value) for s in schema["anyOf"]):
        return False
    if "allOf" in schema and not all(_allows(doc, s, value) for s in schema["allOf"]):
        return False
    if "not" in schema and _allows(doc, schema["not"], value):
        return False
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind is not None and not isinstance(value, types[kind]):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if isinstance(value, str) and "pattern" in schema:
        if not re.search(schema["pattern"], value):
            return False
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            return False
        return all(_allows(doc, schema.get("items", {}), item) for item in value)
    if isinstance(value, dict):
        if not set(schema.get("required", ())) <= set(value):
            return False
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is False and set(value) - set(properties):
            return False
        return all(_allows(doc, properties.get(k, {}), v) for k, v in value.items())
    return True


SESSION = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
REVIEW_BODIES: list[dict[str, Any]] = [
    {"messages": SESSION},
    {"messages": SESSION, "system": []},
    {"messages": SESSION, "system": ["be brief"]},
    {"messages": SESSION, "events": SESSION},
    # Empty sessions are a 200 (skipped: empty_session); both lists is no session, even
    # when ``system`` rules the messages' branch out.
    {"messages": []},
    {"messages": [], "system": []},
    {"events": [], "system": [], "tools": []},
    {"messages": [], "events": []},
    {"messages": [], "events": [], "system": [""]},
    {"events": [], "system": ["a\u0000"]},
    {},
    {"messages": None},
    {"messages": SESSION, "window": "recent:2"},
    {"messages": SESSION, "window": " current-turn "},
    {"messages": SESSION, "window": "recent:0"},
    {"messages": SESSION, "window": "recent:x"},
    {"messages": SESSION, "window": "last:3"},
    {"messages": SESSION, "mask": "everything"},
    {"messages": SESSION, "unknown": 1},
]


@pytest.mark.parametrize("body", REVIEW_BODIES, ids=[json.dumps(b) for b in REVIEW_BODIES])
async def test_the_review_schema_allows_exactly_the_bodies_the_handler_takes(
    body: dict[str, Any],
) -> None:
    async with app_client(create_app(_service(), KEYS_ENV)) as client:
        doc = (await client.get("/openapi.json")).json()
        response = await client.post(
            "/v1/review", json=body | {"project_only": True}, headers=bearer(CLIENT_KEY)
        )

    operation = doc["paths"]["/v1/review"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert response.status_code in (200, 422), response.text
    assert (response.status_code == 200) == _allows(doc, schema, body | {"project_only": True})


# --- the X-Foureyes-* headers: every one sent is declared -----------------------------------


async def test_every_foureyes_header_an_answer_sends_is_declared_with_a_description() -> None:
    user = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    calls = {
        "/v1/chat/completions": {"model": "foureyes-support", "messages": user},
        "/v1/check": {"messages": user, "draft": {"content": "Hello to you."}},
    }
    async with app_client(create_app(_service(), KEYS_ENV)) as client:
        doc = (await client.get("/openapi.json")).json()
        sent: dict[str, set[str]] = {}
        streamed = calls["/v1/chat/completions"] | {"stream": True}
        for path, body in [*calls.items(), ("/v1/chat/completions", streamed)]:
            response = await client.post(path, json=body, headers=bearer(CLIENT_KEY))
            assert response.status_code == 200, response.text
            names = {n for n in response.headers if n.startswith("x-foureyes-")}
            sent.setdefault(path, set()).update(names)

    # Both answers decide, so the decision headers are among what was sent.
    assert {"x-foureyes-decision", "x-foureyes-ignored"} <= sent["/v1/chat/completions"]
    assert "x-foureyes-delivered-sha256" in sent["/v1/check"]
    for method, path, operation in _operations(doc):
        declared = operation["responses"].get("200", {}).get("headers", {})
        assert all(len(h["description"]) > 20 for h in declared.values()), path
        names = {name.lower() for name in declared}
        assert sent.get(path, set()) <= names, (method, path, sent.get(path, set()) - names)
    stream = doc["paths"]["/v1/check/stream"]["post"]["responses"]["200"]["headers"]
    assert list(stream) == ["X-Foureyes-Trace-Id"]
