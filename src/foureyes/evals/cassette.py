"""Record and replay of model exchanges, as provider wrappers.

:class:`RecordingProvider` wraps a route's real provider and appends every exchange to
a cassette (a JSON-lines file). :class:`ReplayProvider` serves a route from a cassette
instead of the network, keyed by a canonical digest of the route and the request; a
request the cassette has not seen raises :class:`CassetteMiss`.

``CassetteMiss`` is deliberately not a :class:`~foureyes.core.errors.FoureyesError`: the
gate and triage turn those into reason codes, and a replay that quietly fell back would
score a different system than the one recorded. The eval runner stops the run on it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from foureyes.config import Config
from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import UsageError
from foureyes.llm.provider import ChatRequest, ChatResult, Provider
from foureyes.llm.routes import build_provider

__all__ = [
    "CassetteMiss",
    "RecordingProvider",
    "ReplayProvider",
    "eval_providers",
    "exchange_key",
    "load_cassette",
]


class CassetteMiss(UsageError):
    """A replayed run made a request its cassette does not hold."""

    def __init__(self, route: str, key: str) -> None:
        """Name the route and the request digest that were not found."""
        super().__init__(f"cassette has no exchange for route {route!r}, request {key[:16]}")
        self.route = route
        """The route asked."""
        self.key = key
        """The request's digest."""


def exchange_key(route: str, request: ChatRequest) -> str:
    """The canonical digest of a request on a route (the cassette's lookup key).

    A request without a ``seed`` is keyed as it was before requests could carry one, so
    cassettes recorded then still replay.
    """
    return sha256_hex(canonical_json({"route": route, "request": _request_json(request)}))


def _request_json(request: ChatRequest) -> dict[str, Any]:
    return request.model_dump(mode="json", exclude={"seed"} if request.seed is None else None)


def load_cassette(path: Path) -> dict[str, list[ChatResult]]:
    """The exchanges in a cassette file, by key, in recorded order.

    Raises:
        UsageError: the file is unreadable or a line is not a recorded exchange.
    """
    found: dict[str, list[ChatResult]] = defaultdict(list)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read cassette {path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            found[entry["key"]].append(ChatResult.model_validate(entry["result"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path}:{number}: not a cassette exchange ({exc})") from exc
    return dict(found)


class RecordingProvider:
    """A provider that forwards to ``inner`` and appends each exchange to ``path``."""

    def __init__(self, inner: Provider, path: Path) -> None:
        """Record the exchanges of ``inner`` into ``path`` (appended, one JSON per line)."""
        self.route = inner.route
        """The route of the wrapped provider."""
        self._inner = inner
        self._path = path

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        """Complete through the wrapped provider and record the exchange (not failures)."""
        result = await self._inner.complete(request, timeout_s=timeout_s)
        entry: dict[str, Any] = {
            "key": exchange_key(self.route, request),
            "route": self.route,
            "request": _request_json(request),
            "result": result.model_dump(mode="json"),
        }
        # One write call per line, in append mode: concurrent pairs never interleave a line.
        with self._path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")
        return result

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self._inner.aclose()


class ReplayProvider:
    """A provider that answers only from recorded exchanges.

    The same request recorded several times is answered in recorded order, the last
    answer repeating once they are used up.
    """

    def __init__(self, route: str, exchanges: dict[str, list[ChatResult]]) -> None:
        """Serve ``route`` from ``exchanges`` (see :func:`load_cassette`)."""
        self.route = route
        """The route replayed."""
        self._exchanges = exchanges
        self._used: dict[str, int] = defaultdict(int)

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        """The recorded result of ``request``.

        Raises:
            CassetteMiss: the cassette holds no exchange for this request.
        """
        key = exchange_key(self.route, request)
        recorded = self._exchanges.get(key)
        if not recorded:
            raise CassetteMiss(self.route, key)
        index = min(self._used[key], len(recorded) - 1)
        self._used[key] += 1
        return recorded[index]

    async def aclose(self) -> None:
        """Nothing to release."""


def eval_providers(
    config: Config,
    routes: Iterable[str],
    environ: Mapping[str, str],
    *,
    record: Path | None = None,
    replay: Path | None = None,
) -> dict[str, Provider]:
    """One provider per named route: live, recording into ``record``, or replaying ``replay``.

    Replay builds no real provider at all, so a replayed run cannot reach the network.

    Raises:
        ConfigError: a live route cannot be built (unknown kind, missing key).
        UsageError: both ``record`` and ``replay`` are given, or the cassette is unreadable.
    """
    if record is not None and replay is not None:
        raise UsageError("a run either records or replays, not both")
    names = sorted(set(routes))
    if replay is not None:
        exchanges = load_cassette(replay)
        return {name: ReplayProvider(name, exchanges) for name in names}
    built = {name: build_provider(name, config.routes[name], environ) for name in names}
    if record is None:
        return dict(built)
    return {name: RecordingProvider(provider, record) for name, provider in built.items()}
