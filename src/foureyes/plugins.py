"""Plugins: route kinds, rules and input checks that installed distributions register.

Three entry-point groups extend foureyes, and foureyes registers its own built-ins through
them exactly as a third party would (``pyproject.toml``), so a built-in has no back door:

- ``foureyes.route_kinds``: name = a route ``kind``, object = a provider factory
  (:data:`foureyes.llm.routes.ProviderFactory`);
- ``foureyes.rules``: name = a rule id, object = a :class:`foureyes.gate.rules.Rule`;
- ``foureyes.checks``: name = an input check id, object = a
  :class:`foureyes.inputs.InputCheck` (docs/inputs.md).

Each group is read from the installed metadata once per process (:func:`load`). A plugin
that cannot be imported, whose object is not of its group's type, or whose name another
distribution registers too (a built-in's included) is a :class:`ConfigError` naming the
entry point and its distribution, and nothing of that group is used: a group loads whole
or not at all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from foureyes.core.errors import ConfigError

__all__ = ["BUILTIN_DISTRIBUTION", "CHECKS", "Plugin", "ROUTE_KINDS", "RULES", "load"]

ROUTE_KINDS = "foureyes.route_kinds"
"""The entry-point group of route kinds."""
RULES = "foureyes.rules"
"""The entry-point group of rules."""
CHECKS = "foureyes.checks"
"""The entry-point group of input checks."""
BUILTIN_DISTRIBUTION = "foureyes"
"""The distribution whose entry points are the built-ins."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Plugin(Generic[T]):
    """One loaded entry point."""

    name: str
    """The entry point's name: the route kind, rule id or check id it registers."""
    value: str
    """What it points at, ``module:attribute``."""
    distribution: str
    """The distribution that declares it (``foureyes`` for a built-in)."""
    version: str
    """That distribution's version."""
    obj: T
    """The loaded object, checked against the group's type."""

    @property
    def builtin(self) -> bool:
        """Whether foureyes itself registers it."""
        return self.distribution == BUILTIN_DISTRIBUTION

    def describe(self) -> str:
        """``name = value (distribution version)``, how errors and listings name it."""
        return f"{self.name} = {self.value} ({self.distribution} {self.version})"

    def as_json(self) -> dict[str, str]:
        """The plugin as ``config check --json`` lists it."""
        return {
            "name": self.name,
            "value": self.value,
            "distribution": self.distribution,
            "version": self.version,
        }


def load(group: str, convert: Callable[[str, object], T]) -> tuple[Plugin[T], ...]:
    """Every entry point of ``group``, loaded and checked, sorted by name.

    ``convert`` takes an entry point's name and loaded object and returns the object
    typed, or raises ``TypeError`` or ``ValueError`` saying why it does not belong in the
    group.

    Raises:
        ConfigError: one line per entry point that cannot be imported or converted, per
            name registered twice, or foureyes' own entry points are missing (its install
            metadata is stale). Nothing of the group is returned then.
    """
    loaded, problems = _discover(group)
    plugins: list[Plugin[T]] = []
    for plugin in loaded:
        try:
            obj = convert(plugin.name, plugin.obj)
        except (TypeError, ValueError) as exc:
            problems = (*problems, f"{group} entry point {plugin.describe()}: {exc}")
            continue
        plugins.append(Plugin(plugin.name, plugin.value, plugin.distribution, plugin.version, obj))
    if problems:
        raise ConfigError(list(problems))
    return tuple(plugins)


@functools.cache
def _discover(group: str) -> tuple[tuple[Plugin[object], ...], tuple[str, ...]]:
    """Import every entry point of ``group`` once per process; problems, not exceptions."""
    found = sorted(entry_points(group=group), key=lambda ep: (ep.name, _distribution(ep)))
    plugins: list[Plugin[object]] = []
    problems: list[str] = []
    for ep in found:
        dist, version = _distribution(ep)
        try:
            obj = ep.load()
        # A plugin's module is third-party code: its import may raise anything, and each
        # failure must become one line naming the entry point, not a traceback (DESIGN 4.4).
        except Exception as exc:
            problems.append(
                f"{group} entry point {ep.name} = {ep.value} ({dist} {version}) cannot be "
                f"loaded: {type(exc).__name__}: {exc}"
            )
            continue
        plugins.append(Plugin(ep.name, ep.value, dist, version, obj))
    by_name: dict[str, list[Plugin[object]]] = {}
    for plugin in plugins:
        by_name.setdefault(plugin.name, []).append(plugin)
    for name, same in sorted(by_name.items()):
        if len(same) > 1:
            builtin = [p for p in same if p.builtin]
            what = "clashes with the built-in" if builtin else "is registered more than once"
            problems.append(f"{group} {name!r} {what}: " + "; ".join(p.describe() for p in same))
    if not any(_distribution(ep)[0] == BUILTIN_DISTRIBUTION for ep in found):
        problems.append(
            f"foureyes registers no {group} entry points: its installed metadata is stale "
            "(reinstall it, e.g. pip install -e .)"
        )
    return tuple(plugins), tuple(problems)


def _distribution(ep: EntryPoint) -> tuple[str, str]:
    """The name and version of the distribution declaring ``ep``."""
    if ep.dist is None:  # entry points built by hand; metadata always sets it
        return "unknown", "?"
    return ep.dist.name, ep.dist.version
