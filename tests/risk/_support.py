"""Stand-ins shared by the risk tests: model answers, a scripted provider, a manual clock."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from foureyes.config import Config, RouteConfig
from foureyes.core.roles import Role
from foureyes.llm.provider import Usage
from foureyes.llm.routes import Routes
from tests.helpers.scripted import ScriptedProvider

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


def scripted_provider() -> ScriptedProvider:
    """A scripted provider whose text replies report usage, so costs are non-zero."""
    return ScriptedProvider(usage=Usage(prompt_tokens=100, completion_tokens=50))


def scripted_config(route: dict[str, Any] | None = None, **risk: Any) -> Config:
    """Every role on one ``scripted`` route (priced, so costs are non-zero)."""
    settings = {"price_in": 1.0, "price_out": 2.0} | (route or {})
    scripted = RouteConfig(kind="offline", model="scripted", **settings)
    roles = {role.value: "scripted" for role in Role}
    return Config(routes={"scripted": scripted}, roles=roles, risk=risk)  # type: ignore[arg-type]


def scripted_routes(config: Config, provider: ScriptedProvider) -> Routes:
    return Routes(config, {"scripted": provider})
