"""Prometheus metrics of one app, in the app's own registry (never the global one).

Every label takes values from a closed set (route templates, reason codes, roles, tiers,
levels, configured route and ledger names), so a client cannot grow the series count.
Capabilities report through the :class:`Metrics` methods; requests are counted by
:class:`MetricsMiddleware`; ``GET /metrics`` serves :meth:`Metrics.exposition`.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import generate_latest as _generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics import MetricWrapperBase
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foureyes import __version__
from foureyes.core.errors import UsageError
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.risk.levels import RiskLevel
from foureyes.store import GroupCommits

__all__ = [
    "METRICS_CONTENT_TYPE",
    "Metrics",
    "MetricsMiddleware",
    "UNMATCHED_ROUTE",
    "route_label",
]

METRICS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""The content type of :meth:`Metrics.exposition`: Prometheus text format 0.0.4, which
every Prometheus version reads (our metric names are all of the classic form)."""

_TIERS = frozenset({"L0", "L1", "L2"})
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_OUTCOME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_MODEL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
UNMATCHED_ROUTE = "unmatched"
"""The route label of a request no route matched (or answered before routing)."""

_M = TypeVar("_M", bound=MetricWrapperBase)


class _Series(Generic[_M]):
    """A labelled counter's or histogram's children, each looked up once.

    ``labels()`` checks the values and takes the metric's lock on every call; a reply
    counts five series, so each child is kept here by its label values after the first
    call. The values come from closed sets (see the module docstring), and the metric
    keeps every child it made anyway, so this holds nothing the metric does not.
    """

    def __init__(self, metric: _M) -> None:
        self._metric: _M = metric
        self._children: dict[tuple[str, ...], _M] = {}

    def __call__(self, *values: str) -> _M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


class Metrics:
    """The metrics of one app. Methods are cheap and never raise on valid input.

    Attributes:
        registry: the app's own collector registry.
    """

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry(auto_describe=True)
        self._requests = _Series(
            Counter(
                "foureyes_http_requests",
                "HTTP requests by route template, method and status.",
                ["route", "method", "status"],
                registry=registry,
            )
        )
        self._request_seconds = _Series(
            Histogram(
                "foureyes_http_request_duration_seconds",
                "Time from request to the end of the response, by route template.",
                ["route", "method"],
                buckets=_LATENCY_BUCKETS,
                registry=registry,
            )
        )
        self._decisions = _Series(
            Counter(
                "foureyes_decisions",
                "Gate decisions by reason code (approved, or why the fallback went out).",
                ["reason"],
                registry=registry,
            )
        )
        self._risk = _Series(
            Counter(
                "foureyes_risk_triages",
                "Triages by deepest tier reached and level (unknown: no usable level).",
                ["tier", "level"],
                registry=registry,
            )
        )
        self._model_calls = _Series(
            Counter(
                "foureyes_model_calls",
                "Model calls by role, route and outcome (ok, or the error class).",
                ["role", "route", "outcome"],
                registry=registry,
            )
        )
        self._model_seconds = _Series(
            Histogram(
                "foureyes_model_call_duration_seconds",
                "Latency of model calls by role and route.",
                ["role", "route"],
                buckets=_MODEL_BUCKETS,
                registry=registry,
            )
        )
        self._budget_calls = Gauge(
            "foureyes_budget_remaining_calls",
            "Calls left today under a spend-ledger limit.",
            ["key"],
            registry=registry,
        )
        self._budget_usd = Gauge(
            "foureyes_budget_remaining_usd",
            "USD left today under a spend-ledger limit.",
            ["key"],
            registry=registry,
        )
        build = Gauge(
            "foureyes_build_info", "The running foureyes version.", ["version"], registry=registry
        )
        build.labels(version=__version__).set(1)
        # Every reason is exported from the start, so a rate over it is defined at zero.
        for reason in ReasonCode:
            self._decisions(reason.value)
        self._scraped = _ScrapedCounters()
        registry.register(self._scraped)

    def watch_group_commits(self, read: Callable[[], GroupCommits]) -> None:
        """Export the store's group commit counts, read from ``read`` at each scrape."""
        self._scraped.group_commits = read

    def watch_log_drops(self, read: Callable[[], int]) -> None:
        """Export ``foureyes_log_lines_dropped_total``, read from ``read`` at each scrape."""
        self._scraped.log_drops = read

    def watch_unopenable_unknowns(self, read: Callable[[], int]) -> None:
        """Export ``foureyes_unknowns_unopenable_total``, read from ``read`` at each scrape.

        Reads of an open unknown whose sealed words did not open (another key, an altered
        row): each such unknown was shown to the prompts as one whose wording is not kept.
        """
        self._scraped.unopenable_unknowns = read

    def observe_request(self, route: str, method: str, status: int, duration_s: float) -> None:
        """Count one HTTP request (called by :class:`MetricsMiddleware`)."""
        method = method if method in _METHODS else "OTHER"
        self._requests(route, method, str(status)).inc()
        self._request_seconds(route, method).observe(max(0.0, duration_s))

    def record_decision(self, reason: ReasonCode) -> None:
        """Count one gate decision."""
        self._decisions(ReasonCode(reason).value).inc()

    def record_risk(self, tier: str, level: RiskLevel | None) -> None:
        """Count one triage: ``tier`` is ``L0``, ``L1`` or ``L2``; ``None`` means unknown.

        Raises:
            UsageError: ``tier`` is not one of the three tiers.
        """
        if tier not in _TIERS:
            raise UsageError(f"risk tier must be one of {sorted(_TIERS)}, got {tier!r}")
        self._risk(str(tier), "unknown" if level is None else level.value).inc()

    def observe_model_call(self, role: Role, route: str, latency_s: float, outcome: str) -> None:
        """Count one model call and its latency.

        Args:
            role: the role that called.
            route: the configured route name.
            latency_s: seconds the call took.
            outcome: ``ok``, or the error's class name (as in the ``model_call`` event).

        Raises:
            UsageError: ``latency_s`` is negative or not finite, or ``outcome`` is not an
                identifier.
        """
        if not math.isfinite(latency_s) or latency_s < 0:
            raise UsageError(f"latency_s must be a finite, non-negative number, got {latency_s}")
        if not _OUTCOME.fullmatch(outcome):
            raise UsageError(f"outcome must be an identifier such as 'ok', got {outcome!r}")
        role_name = Role(role).value
        self._model_calls(role_name, route, outcome).inc()
        self._model_seconds(role_name, route).observe(latency_s)

    def set_budget_remaining(self, key: str, calls: int | None, usd: float | None) -> None:
        """Publish what is left today under the ledger limit ``key``.

        ``None`` means the limit has no maximum on that dimension and removes the series.
        Use beyond a maximum (a call already under way when it was reached) shows as 0.
        """
        for gauge, value in ((self._budget_calls, calls), (self._budget_usd, usd)):
            if value is None:
                # Older prometheus-client versions raise KeyError for a series never set.
                with contextlib.suppress(KeyError):
                    gauge.remove(key)
            else:
                gauge.labels(key=key).set(max(0.0, float(value)))

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format (:data:`METRICS_CONTENT_TYPE`)."""
        return _generate_latest(self.registry)


class _ScrapedCounters:
    """Counters their owners keep, read when scraped (group commits, dropped log lines...)."""

    def __init__(self) -> None:
        self.group_commits: Callable[[], GroupCommits] | None = None
        """Where the store's counts come from; ``None`` until the app's store is open."""
        self.log_drops: Callable[[], int] | None = None
        """Where the count of dropped log lines comes from; ``None`` until watched."""
        self.unopenable_unknowns: Callable[[], int] | None = None
        """Where the count of unopenable sealed unknowns comes from; ``None`` until watched."""

    def collect(self) -> Iterator[Metric]:
        if self.log_drops is not None:
            yield CounterMetricFamily(
                "foureyes_log_lines_dropped",
                "Log lines this process dropped because its log sink did not keep up.",
                value=self.log_drops(),
            )
        if self.unopenable_unknowns is not None:
            yield CounterMetricFamily(
                "foureyes_unknowns_unopenable",
                "Reads of open unknowns whose sealed words did not open (key changed).",
                value=self.unopenable_unknowns(),
            )
        if self.group_commits is None:
            return
        stats = self.group_commits()
        yield CounterMetricFamily(
            "foureyes_store_group_commits",
            "Grouped store transactions: run writes that shared one commit.",
            value=stats.rounds,
        )
        yield CounterMetricFamily(
            "foureyes_store_grouped_writes",
            "Run writes those transactions held (divided by the commits: the group size).",
            value=stats.writes,
        )


def route_label(scope: Scope) -> str:
    """The route template a request matched (``/v1/keys/{ref}``), never the raw path.

    A request that matched no route, or was answered before routing (a body declared
    over the size limit), is :data:`UNMATCHED_ROUTE`.
    """
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


class MetricsMiddleware:
    """Counts every HTTP request by route template, method and final status."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def observe(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            self.metrics.observe_request(
                route_label(scope), scope["method"], status, time.perf_counter() - started
            )
