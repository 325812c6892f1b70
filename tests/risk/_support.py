"""Stand-ins shared by the risk tests: model answers, a scripted provider, routes."""

from __future__ import annotations

from typing import Any

from foureyes.config import Config, RouteConfig
from foureyes.core.roles import Role
from foureyes.llm.provider import Usage
from foureyes.llm.routes import Routes
from tests.helpers.scripted import ScriptedProvider


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
