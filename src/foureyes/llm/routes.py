"""Route kinds: a registry of provider factories, and the set of built providers.

A route ``kind`` resolves through the registry that :func:`route_kind` fills. The built-in
``openai`` and ``offline`` kinds register exactly as a third party would, and each imports
its SDK inside its factory, so importing foureyes does not import the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

from foureyes.config import Config, RouteConfig
from foureyes.core.errors import ConfigError
from foureyes.core.roles import Role
from foureyes.llm.provider import Provider

__all__ = ["ProviderFactory", "Routes", "build_provider", "known_kinds", "route_kind"]

ProviderFactory: TypeAlias = Callable[[str, RouteConfig, Mapping[str, str]], Provider]
"""Builds the provider of one route from its name, its config and the environment."""

_KINDS: dict[str, ProviderFactory] = {}


def route_kind(name: str) -> Callable[[ProviderFactory], ProviderFactory]:
    """Register a provider factory for route kind ``name`` (a decorator)."""

    def register(factory: ProviderFactory) -> ProviderFactory:
        _KINDS[name] = factory
        return factory

    return register


def known_kinds() -> list[str]:
    """The registered route kinds, sorted."""
    _load_builtin_kinds()
    return sorted(_KINDS)


def build_provider(name: str, route: RouteConfig, environ: Mapping[str, str]) -> Provider:
    """Build the provider for one route.

    Raises:
        ConfigError: the kind is not registered, or its API-key variable is not set.
    """
    _load_builtin_kinds()
    factory = _KINDS.get(route.kind)
    if factory is None:
        raise ConfigError(
            [f"routes.{name}.kind {route.kind!r} is unknown (known: {', '.join(sorted(_KINDS))})"]
        )
    if route.api_key_env and not environ.get(route.api_key_env):
        raise ConfigError([f"environment variable {route.api_key_env} is not set"])
    return factory(name, route, environ)


def _load_builtin_kinds() -> None:
    # Importing the modules runs their @route_kind decorators; the SDKs stay unimported.
    from foureyes.llm import offline, openai_compat  # noqa: F401


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
