"""FastJsonRoute: the short way answers exactly as FastAPI would, or hands the request over.

Every request goes to two copies of one endpoint on the app's own router, one a plain
FastAPI route and one a ``FastJsonRoute``; the answers (status, body, headers) and the
dependency's runs must be the same, for well-formed requests and for every kind of
malformed one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import fastapi.routing
import httpx
import pytest
from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from foureyes.server._fast_route import FastJsonRoute, plan_of
from foureyes.server.gateway import gateway_router
from tests.helpers.otel import fresh_exporter


class Item(BaseModel):
    name: str = Field(min_length=1, max_length=8)
    count: int = Field(default=1, ge=0, le=5)
    tags: list[str] = Field(default_factory=list, max_length=2)
    extra: dict[str, Any] | None = None


class Calls:
    """How often each copy's dependency ran."""

    def __init__(self) -> None:
        self.by_copy: dict[str, int] = {"plain": 0, "fast": 0}


async def principal(request: Request) -> str:
    """The dependency: refuses a missing key (401), and one key as rate-limited (429)."""
    request.app.state.calls.by_copy[request.url.path.strip("/")] += 1
    key = request.headers.get("authorization")
    if key is None:
        raise HTTPException(401, "no key", headers={"www-authenticate": "Bearer"})
    if key == "Bearer slow":
        raise HTTPException(429, "slow down")
    return key


Key = Annotated[str, Depends(principal)]


async def endpoint(body: Item, request: Request, who: Key) -> Response:
    item = body.model_dump(exclude={"extra"}) | {"extra": repr(body.extra)}
    return JSONResponse({"item": item, "who": who}, headers={"x-count": str(body.count)})


# FastAPI's telemetry off for the app: with it on (a tracer, meter or logger provider set
# for the process, as another test of the session may have set one) every request goes
# to FastAPI's handler, which test_with_fastapis_telemetry_on_every_request_goes_to_fastapi
# shows; the other tests see the short way whatever the session set.
_NO_TELEMETRY: Any = {"tracing": False, "metrics": False, "logs": False}


def _app(calls: Calls, *, telemetry: bool = False) -> FastAPI:
    app = FastAPI() if telemetry else FastAPI(telemetry=_NO_TELEMETRY)
    app.state.calls = calls
    for copy, route_class in (("plain", APIRoute), ("fast", FastJsonRoute)):
        app.router.add_api_route(
            f"/{copy}",
            endpoint,
            methods=["POST"],
            response_model=None,
            route_class_override=route_class,
        )
    return app


async def _both(
    app: FastAPI, content: bytes, headers: dict[str, str]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answers = []
        for copy in ("plain", "fast"):
            response = await client.post(f"/{copy}", content=content, headers=headers)
            answers.append((response.status_code, response.content, dict(response.headers)))
    return answers[0], answers[1]


GOOD = {"name": "a", "count": 2, "tags": ["x"]}
_JSON = {"content-type": "application/json", "authorization": "Bearer k"}
_NO_KEY = {"content-type": "application/json"}
CASES: list[tuple[str, bytes, dict[str, str]]] = [
    ("well-formed", json.dumps(GOOD).encode(), _JSON),
    ("no-key", json.dumps(GOOD).encode(), _NO_KEY),
    ("rate-limited", json.dumps(GOOD).encode(), _JSON | {"authorization": "Bearer slow"}),
    ("not-json", b'{"name": ', _JSON),
    ("not-json-no-key", b'{"name": ', _NO_KEY),
    ("empty-body", b"", _JSON),
    ("not-an-object", b"[1, 2]", _JSON),
    ("invalid-field", b'{"name": "", "count": 9}', _JSON),
    ("invalid-field-no-key", b'{"name": ""}', _NO_KEY),
    ("missing-field", b'{"count": 1}', _JSON),
    ("nan", b'{"name": "a", "extra": {"x": NaN}}', _JSON),
    ("charset", json.dumps(GOOD).encode(), _JSON | {"content-type": "application/json; x=y"}),
    ("text-plain", json.dumps(GOOD).encode(), _JSON | {"content-type": "text/plain"}),
    ("no-content-type", json.dumps(GOOD).encode(), {"authorization": "Bearer k"}),
    ("utf-16", json.dumps(GOOD).encode("utf-16"), _JSON),
    ("not-utf8", b'{"name": "\xff"}', _JSON),
]


@pytest.mark.parametrize(("content", "headers"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_each_request_is_answered_as_fastapi_answers_it(
    content: bytes, headers: dict[str, str]
) -> None:
    calls = Calls()

    plain, fast = await _both(_app(calls), content, headers)

    assert fast == plain
    assert calls.by_copy["fast"] == calls.by_copy["plain"] <= 1


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
BODIES = (
    st.fixed_dictionaries(
        {}, optional={k: JSONISH for k in ("name", "count", "tags", "extra", "other")}
    )
    | JSONISH
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    BODIES,
    st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain"]),
    st.sampled_from([None, "Bearer k", "Bearer slow"]),
)
def test_any_body_is_answered_as_fastapi_answers_it(
    body: object, content_type: str, key: str | None
) -> None:
    calls = Calls()
    headers = {"content-type": content_type} | ({"authorization": key} if key else {})

    plain, fast = asyncio.run(_both(_app(calls), json.dumps(body).encode(), headers))

    assert fast == plain
    assert calls.by_copy["fast"] == calls.by_copy["plain"] == 1


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths FastAPI's own dependency solving ran for (a spy: it still runs)."""
    paths: list[str] = []
    solve = fastapi.routing.solve_dependencies

    async def spy(*, request: Request, **options: Any) -> Any:
        paths.append(request.url.path)
        return await solve(request=request, **options)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", spy)
    return paths


async def test_a_well_formed_request_skips_fastapis_solving(solved: list[str]) -> None:
    app = _app(Calls())

    await _both(app, json.dumps(GOOD).encode(), _JSON)
    await _both(app, b'{"name": ""}', _JSON)

    assert solved == ["/plain", "/plain", "/fast"]  # only the invalid body's went to FastAPI


async def test_with_fastapis_telemetry_on_every_request_goes_to_fastapi(
    solved: list[str],
) -> None:
    # FastAPI records its spans while it solves; the short way would leave them out.
    exporter = fresh_exporter()  # the session's tracer provider, installed if need be
    app = _app(Calls(), telemetry=True)

    plain, fast = await _both(app, json.dumps(GOOD).encode(), _JSON)

    assert fast[:2] == plain[:2]
    assert solved == ["/plain", "/fast"]
    assert {span.name for span in exporter.get_finished_spans()} >= {"POST /plain", "POST /fast"}


async def test_an_overridden_dependency_is_left_to_fastapi(solved: list[str]) -> None:
    app = _app(Calls())
    app.dependency_overrides[principal] = lambda: "overridden"

    plain, fast = await _both(app, json.dumps(GOOD).encode(), _NO_KEY)

    assert fast == plain and json.loads(fast[1])["who"] == "overridden"
    assert solved == ["/plain", "/fast"]


def _route(endpoint: Any, **options: Any) -> APIRoute:
    return FastJsonRoute("/x", endpoint, methods=["POST"], **options)


async def _yielding(request: Request) -> AsyncIterator[str]:
    yield "x"


async def _with_query(request: Request, q: str = Query("")) -> str:
    return q


async def _simple(request: Request) -> str:
    return "x"


async def _ok(body: Item, who: Annotated[str, Depends(_simple)]) -> Response:
    return Response()


async def _two_bodies(a: Item, b: Item) -> Response:
    return Response()


async def _embedded(body: Annotated[Item, Body(embed=True)]) -> Response:
    return Response()


async def _query(body: Item, q: str = "") -> Response:
    return Response()


async def _yield_dependency(body: Item, who: Annotated[str, Depends(_yielding)]) -> Response:
    return Response()


async def _deep_dependency(body: Item, who: Annotated[str, Depends(_with_query)]) -> Response:
    return Response()


def _sync(body: Item) -> Response:
    return Response()


def test_the_short_way_is_planned_only_for_the_endpoints_it_can_call() -> None:
    assert plan_of(_route(_ok, response_model=None)) is not None
    for unsupported in (_two_bodies, _embedded, _query, _yield_dependency, _deep_dependency, _sync):
        assert plan_of(_route(unsupported, response_model=None)) is None, unsupported.__name__
    assert plan_of(_route(_ok, response_model=Item)) is None


async def test_an_endpoint_it_cannot_call_is_answered_by_fastapi(solved: list[str]) -> None:
    app = FastAPI(telemetry=_NO_TELEMETRY)
    app.router.add_api_route(
        "/x", _query, methods=["POST"], response_model=None, route_class_override=FastJsonRoute
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.post("/x?q=1", json=GOOD)

    assert response.status_code == 200
    assert solved == ["/x"]


async def test_an_endpoint_that_does_not_return_a_response_is_a_bug() -> None:
    async def returns_a_dict(body: Item) -> Any:
        return {"not": "a response"}

    app = FastAPI(telemetry=_NO_TELEMETRY)
    app.router.add_api_route(
        "/x",
        returns_a_dict,
        methods=["POST"],
        response_model=None,
        route_class_override=FastJsonRoute,
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        with pytest.raises(TypeError, match="must return a Response"):
            await client.post("/x", json=GOOD)


def test_the_gateway_takes_the_short_way_only_on_a_router_it_is_given() -> None:
    given = gateway_router(fastapi.APIRouter())
    new = gateway_router()

    def chat(router: fastapi.APIRouter) -> APIRoute:
        return next(
            r for r in router.routes if isinstance(r, APIRoute) and r.path == "/v1/chat/completions"
        )

    assert type(chat(given)) is FastJsonRoute and plan_of(chat(given)) is not None
    assert type(chat(new)) is APIRoute


def test_a_fastapi_that_describes_endpoints_otherwise_leaves_the_route_to_fastapi() -> None:
    route = _route(_ok, response_model=None)
    # A Dependant without the fields this reads, as a FastAPI that renamed them would give.
    route.dependant = type("Dependant", (), {"body_params": route.dependant.body_params})()  # type: ignore[assignment]

    assert plan_of(route) is None
