"""Route kinds: provider factories registered by entry point, and the set of built providers.

A route ``kind`` names an entry point of the ``foureyes.route_kinds`` group
(:mod:`foureyes.plugins`) whose object is a :data:`ProviderFactory`. The built-in
``openai`` and ``offline`` kinds are registered there by foureyes' own ``pyproject.toml``,
exactly as a third party registers its own, and each imports its SDK inside its factory,
so importing foureyes (or listing the kinds) does not import the SDK.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TypeAlias

from foureyes import plugins
from foureyes.config import Config, RouteConfig
from foureyes.core.errors import ConfigError
from foureyes.core.roles import Role
from foureyes.llm.provider import Provider

__all__ = ["ProviderFactory", "Routes", "build_provider", "known_kinds", "route_kinds"]

ProviderFactory: TypeAlias = Callable[[str, RouteConfig, Mapping[str, str]], Provider]
"""Builds the provider of one route from its name, its config and the environment."""


def route_kinds() -> tuple[plugins.Plugin[ProviderFactory], ...]:
    """Every registered route kind with the distribution that registers it, sorted by name.

    Raises:
        ConfigError: an entry point cannot be loaded, is not a factory of three positional
            arguments, or names a kind another distribution registers too.
    """
    return plugins.load(plugins.ROUTE_KINDS, _as_factory)


def known_kinds() -> list[str]:
    """The registered route kinds, sorted.

    Raises:
        ConfigError: as :func:`route_kinds`.
    """
    return [kind.name for kind in route_kinds()]


def build_provider(name: str, route: RouteConfig, environ: Mapping[str, str]) -> Provider:
    """Build the provider for one route.

    Raises:
        ConfigError: the kind is not registered, its API-key variable is not set, a
            plugin of the group is broken (:func:`route_kinds`), or the factory raised or
            built something that is not a provider.
    """
    kinds = {kind.name: kind for kind in route_kinds()}
    kind = kinds.get(route.kind)
    if kind is None:
        raise ConfigError(
            [f"routes.{name}.kind {route.kind!r} is unknown (known: {', '.join(sorted(kinds))})"]
        )
    if route.api_key_env and not environ.get(route.api_key_env):
        raise ConfigError([f"environment variable {route.api_key_env} is not set"])
    try:
        provider = kind.obj(name, route, environ)
    except ConfigError:
        raise
    # A plugin's factory is third-party code: whatever it raises is a route that cannot
    # be built, named, rather than a traceback at start-up (DESIGN 4.4).
    except Exception as exc:
        raise ConfigError(
            [f"routes.{name}: route kind {kind.describe()} failed: {type(exc).__name__}: {exc}"]
        ) from exc
    if not all(callable(getattr(provider, m, None)) for m in ("complete", "aclose")):
        raise ConfigError(
            [
                f"routes.{name}: route kind {kind.describe()} built a "
                f"{type(provider).__name__}, not a provider (complete and aclose)"
            ]
        )
    return provider


def _as_factory(name: str, obj: object) -> ProviderFactory:
    """``obj`` as a provider factory, or ``TypeError`` saying why it is not one."""
    if not callable(obj):
        raise TypeError(f"a {type(obj).__name__} is not a provider factory (not callable)")
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # no signature to read (a builtin): trust the call
        return obj
    try:
        signature.bind("route", None, {})
    except TypeError as exc:
        raise TypeError(
            f"{obj!r} does not take (name, route, environ) as a provider factory: {exc}"
        ) from None
    return obj


class Routes:
    """The providers of every route a config uses, one shared instance per route."""

    def __init__(self, config: Config, providers: Mapping[str, Provider]) -> None:
        """Wrap already built providers; use :meth:`build` to build them from config."""
        self.config = config
        self._providers = dict(providers)

    @classmethod
    def build(cls, config: Config, environ: Mapping[str, str]) -> Routes:
        """Build one provider per route that some role uses.

        Raises:
            ConfigError: naming every route that cannot be built (unknown kind, missing key).
        """
        used = sorted({config.roles.route_for(role) for role in Role})
        providers: dict[str, Provider] = {}
        problems: list[str] = []
        for name in used:
            try:
                providers[name] = build_provider(name, config.routes[name], environ)
            except ConfigError as exc:
                problems.extend(exc.problems)
        if problems:
            raise ConfigError(problems)
        return cls(config, providers)

    def provider(self, route: str) -> Provider:
        """The provider serving ``route``."""
        return self._providers[route]

    def for_role(self, role: Role) -> tuple[RouteConfig, Provider]:
        """The route config and provider serving ``role``."""
        name = self.config.roles.route_for(role)
        return self.config.routes[name], self._providers[name]

    async def aclose(self) -> None:
        """Close every provider."""
        for provider in self._providers.values():
            await provider.aclose()
