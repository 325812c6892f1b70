"""Stand-ins shared by the risk tests: model answers, a scripted provider, a manual clock."""

from __future__ import annotations

import datetime as dt
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from foureyes.config import Config, RouteConfig
from foureyes.core.errors import RouteError
from foureyes.core.roles import Role
from foureyes.llm.provider import ChatRequest, ChatResult, Usage
from foureyes.llm.routes import Routes

DIMENSIONS = (
    "depression",
    "anxiety",
    "loneliness",
    "hopelessness",
    "trapped",
    "farewell",
    "arranging",
    "agitation",
)
FLAGS = ("fiction", "quote", "third_party", "joke")


def report(
    level: str = "critical",
    confidence: Any = 0.95,
    *,
    flags: Iterable[str] = (),
    evidence: str = "plan and means named",
    **overrides: Any,
) -> dict[str, Any]:
    """A risk-assessment answer as a model would write it."""
    flagged = set(flags)
    data: dict[str, Any] = {
        "risk_level": level,
        "confidence": confidence,
        "dimensions": {name: 0.5 for name in DIMENSIONS},
        "evidence": evidence,
        "context_flags": {name: name in flagged for name in FLAGS},
    }
    data.update(overrides)
    return data


def answer(level: str = "critical", confidence: Any = 0.95, **kwargs: Any) -> str:
    """:func:`report` as the JSON text of a model answer."""
    return json.dumps(report(level, confidence, **kwargs))


Reply = str | RouteError | Callable[[ChatRequest], str | Awaitable[str]]


@dataclass
class ScriptedProvider:
    """A real provider (the Protocol) that replays queued replies and faults per role."""

    route: str = "scripted"
    replies: dict[Role, deque[Reply]] = field(default_factory=dict)
    requests: list[ChatRequest] = field(default_factory=list)

    def enqueue(self, role: Role, *replies: Reply) -> None:
        self.replies.setdefault(role, deque()).extend(replies)

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        self.requests.append(request)
        assert request.role is not None
        queue = self.replies.get(request.role)
        if not queue:
            raise AssertionError(f"no scripted reply left for {request.role}")
        reply = queue.popleft()
        if isinstance(reply, RouteError):
            raise reply
        text = reply(request) if callable(reply) else reply
        if not isinstance(text, str):
            text = await text
        return ChatResult(
            text=text,
            finish_reason="stop",
            usage=Usage(prompt_tokens=100, completion_tokens=50),
            latency_s=0.001,
            route=self.route,
            model="scripted",
        )

    def sent(self, role: Role) -> list[ChatRequest]:
        return [r for r in self.requests if r.role is role]

    async def aclose(self) -> None:
        return None


def scripted_config(route: dict[str, Any] | None = None, **risk: Any) -> Config:
    """Every role on one ``scripted`` route (priced, so costs are non-zero)."""
    settings = {"price_in": 1.0, "price_out": 2.0} | (route or {})
    scripted = RouteConfig(kind="offline", model="scripted", **settings)
    roles = {role.value: "scripted" for role in Role}
    return Config(routes={"scripted": scripted}, roles=roles, risk=risk)  # type: ignore[arg-type]


def scripted_routes(config: Config, provider: ScriptedProvider) -> Routes:
    return Routes(config, {"scripted": provider})


class ManualClock:
    """A wall clock that moves only when the test says so."""

    def __init__(self, now: dt.datetime | None = None) -> None:
        self.now = now or dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)
