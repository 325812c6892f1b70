"""The FastAPI application behind ``foureyes serve``.

This module only wires the service together; capabilities live in their own packages.
Start-up builds every route's provider, opens the store and records the API keys listed
in the environment, so a bad config, a missing variable, a malformed key or an
unreachable store stops the server before it accepts a request.

Endpoints and who may call them: ``/healthz`` is open (liveness, readiness and the auth
mode; it reveals no data); ``/v1/models``, ``/v1/chat/completions`` (the gateway),
``/v1/assess``, ``/v1/review``, ``/v1/facts/*`` and ``/v1/conversations/*/unknowns``
need a ``client`` key; ``/metrics``,
``/v1/traces`` and ``/v1/keys`` need an ``admin`` key (a Prometheus scrape job sends one
as a bearer token).
In the ``open_loopback`` mode local callers need no key (see :mod:`foureyes.server.auth`).

Request path, outermost first: request log (id, one JSON line) → metrics → CORS (only
when configured) → body guard (size, encoding, read deadline) → FastAPI's error handlers
→ the route's dependencies (key, rate limit, scope) → the handler.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from foureyes import __version__
from foureyes.config import Config, ServerConfig
from foureyes.core.budget import utc_day
from foureyes.core.errors import StoreError
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.evidence import ConfiguredEvidence
from foureyes.llm.calls import route_limit
from foureyes.llm.routes import Routes
from foureyes.pipeline import Runtime, SupportPipeline
from foureyes.review.reviewer import Reviewer
from foureyes.risk.l0 import L0Gate
from foureyes.server._logging import (
    RequestLogMiddleware,
    dropped_log_lines,
    log_event,
    server_logger,
)
from foureyes.server._openapi import one_segment_parameters
from foureyes.server.api import api_router
from foureyes.server.auth import (
    AdminKey,
    AuthMode,
    ClientKey,
    KeyAuthenticator,
    env_api_keys,
    keys_router,
    require_scope,
)
from foureyes.server.console import console_router
from foureyes.server.errors import error_responses, install_error_handlers
from foureyes.server.evals_api import evals_router
from foureyes.server.facts_api import facts_router
from foureyes.server.gateway import gateway_router
from foureyes.server.limits import BodyGuardMiddleware, KeyLimiter, add_cors, key_limiter
from foureyes.server.metrics import METRICS_CONTENT_TYPE, Metrics, MetricsMiddleware
from foureyes.server.purge import purge_on_schedule
from foureyes.server.review_api import review_router
from foureyes.server.text import screen_refused_text
from foureyes.server.unknowns_api import unknowns_router
from foureyes.store import Store
from foureyes.store.api_keys import EnvKeySync, KeyScope
from foureyes.store.roles import Independence
from foureyes.wire.chat import GATEWAY_MODEL

__all__ = [
    "GATEWAY_MODEL",
    "Service",
    "YOUNG_GENERATION_THRESHOLD",
    "create_app",
    "settle_collector",
]

_HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    503: {"description": "The store does not answer: ``status`` is ``unavailable``."},
    **error_responses(413),
}
_METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Prometheus text exposition format.",
        "content": {METRICS_CONTENT_TYPE: {"schema": {"type": "string"}}},
    },
    **error_responses(401, 403, 413, 429, 503),
}


@dataclass(frozen=True, slots=True)
class Service:
    """Everything a request handler may use, built once at start-up.

    Handlers get it as ``request.app.state.service``.
    """

    config: Config
    """The effective configuration."""
    routes: Routes
    """One provider per configured route."""
    store: Store
    """The open store."""
    auth: KeyAuthenticator
    """Checks API keys (used through :func:`foureyes.server.auth.require_scope`)."""
    limiter: KeyLimiter
    """Per-key token buckets: this process's, or the store's (``server.rate_limit_backend``)."""
    metrics: Metrics
    """This app's Prometheus metrics: report decisions, risk and model calls here."""
    pipeline: SupportPipeline
    """The support-message pipeline (triage and the gate) behind the gateway."""
    l0: L0Gate
    """The pipeline's keyword gate; it also screens message text refused as invalid."""
    reviewer: Reviewer
    """The masked reviewer behind ``POST /v1/review``."""
    evidence: ConfiguredEvidence | None
    """The catalog source and kinds of ``[evidence]`` behind ``/v1/facts``; ``None``
    when the config has none (the facts endpoints then select nothing)."""
    facts_independence: Independence | None = None
    """Whether the durable owner is a trust boundary here (checked at start-up against the
    store role's privileges); ``None`` without ``[evidence]``. The facts answers say it."""


def create_app(
    config: Config, environ: Mapping[str, str], *, owns_process: bool = False
) -> FastAPI:
    """Build the app; providers and the store are opened when it starts, closed when it stops.

    With ``owns_process`` (``foureyes serve``: the process serves this app and nothing
    else) the garbage collector is settled once the app has started
    (:func:`settle_collector`), which changes the whole process; an app mounted in
    someone else's process leaves it alone.

    Raises (at start-up, from the lifespan):
        ConfigError: a route cannot be built, a secret variable is not set, a key
            variable is unset or holds a malformed key, no second model reviews a
            model Counselor's replies (:meth:`Config.require_review`), or the
            ``[evidence]`` kinds file is missing or malformed.
        StoreError: the store cannot be opened, migrated, or record the env keys.
    """
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Read before anything opens: a bad kinds file (a template without a slot, say)
        # stops the start like any config error. Its engine, if any, connects on first use.
        evidence = ConfiguredEvidence.from_config(
            config.evidence, timeout_s=config.store.timeout_s, environ=environ
        )
        env_keys = env_api_keys(config.server, environ)
        runtime = await Runtime.open(config, environ, observer=_model_call_metrics(metrics))
        try:
            auth, sync = await KeyAuthenticator.start(runtime.store, config.server, env_keys)
            _announce(await auth.mode(), sync, config.server)
        except BaseException:
            await runtime.aclose()
            raise
        store = runtime.store
        independence = None
        if evidence is not None:
            try:
                independence = await store.observations.independence(
                    owner_service=evidence.owner_service is not None
                )
            except BaseException:
                await runtime.aclose()
                await evidence.aclose()
                raise
            log_event(
                server_logger,
                "facts_independence",
                level="info" if independence.independent else "warning",
                independent=independence.independent,
                reason=independence.reason,
                detail=independence.detail,
            )
        metrics.watch_group_commits(lambda: store.group_commits)
        metrics.watch_log_drops(dropped_log_lines)
        metrics.watch_unopenable_unknowns(lambda: store.unknowns.unopenable)
        interval = config.privacy.purge_interval_s
        purging = (
            asyncio.create_task(purge_on_schedule(store.traces, interval)) if interval else None
        )
        app.state.service = Service(
            config=config,
            routes=runtime.routes,
            store=store,
            auth=auth,
            limiter=key_limiter(config.server, store.rate_buckets),
            metrics=metrics,
            pipeline=runtime.pipeline,
            l0=runtime.l0,
            reviewer=runtime.reviewer,
            evidence=evidence,
            facts_independence=independence,
        )
        if owns_process:
            settle_collector()
            # Warnings become log records, queued like the rest, instead of writes to
            # stderr on the thread that warned (the event loop's).
            logging.captureWarnings(True)
        try:
            yield
        finally:
            if purging is not None:
                purging.cancel()
                await asyncio.gather(purging, return_exceptions=True)
            await app.state.service.limiter.aclose()
            await runtime.aclose()
            if evidence is not None:
                await evidence.aclose()

    app = FastAPI(title="foureyes", version=__version__, lifespan=lifespan)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = one_segment_parameters(FastAPI.openapi(app))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    install_error_handlers(app, screen=screen_refused_text)
    # Each add_middleware wraps the ones before it: the last added sees requests first.
    app.add_middleware(
        BodyGuardMiddleware,
        max_bytes=config.server.max_body_bytes,
        timeout_s=config.server.body_timeout_s,
    )
    add_cors(app, config.server.cors_origins)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestLogMiddleware)
    # The gateway's routes are the app's own, not an included router's, and matched
    # first: FastAPI (0.16x) finds an included router's route through a context it
    # builds per request, and tries each included router in turn, about 170 Python calls
    # of each reply before these routes (benchmarks/README.md, "The gateway's routes on
    # the app itself"). Its other routers are not on the hot path.
    gateway_router(app.router)
    app.include_router(keys_router)
    app.include_router(api_router())
    app.include_router(evals_router())
    app.include_router(unknowns_router())
    client_only = [Depends(require_scope(KeyScope.CLIENT))]
    # What the key dependency adds to each of these routes' own answers.
    keyed = error_responses(401, 413, 429, 503)
    # The facts handlers take the principal themselves: observations are scoped to it.
    app.include_router(facts_router(lambda request: request.app.state.service), responses=keyed)
    app.include_router(
        review_router(lambda request: request.app.state.service.reviewer),
        dependencies=client_only,
        responses=keyed,
    )
    app.include_router(console_router(model=GATEWAY_MODEL))

    @app.get("/healthz", responses=_HEALTH_RESPONSES)
    async def healthz(request: Request) -> JSONResponse:
        """Liveness and readiness: the store answers, the auth mode, the offline roles."""
        service: Service = request.app.state.service
        body: dict[str, Any] = {
            "status": "ok",
            "version": __version__,
            "offline_roles": sorted(
                role.value for role in Role if service.config.route_for(role)[1].kind == "offline"
            ),
        }
        try:
            await service.store.ping()
            mode = await service.auth.mode()
        except StoreError as exc:
            body |= {"status": "unavailable", "store": exc.operation}
            return JSONResponse(body, status_code=503)
        body |= {"store": service.store.dialect, "auth": mode.value}
        return JSONResponse(body)

    @app.get("/v1/models", responses=keyed)
    async def models(_: ClientKey) -> dict[str, Any]:
        """OpenAI-compatible model list: the guarded pipeline is the one model offered."""
        return {
            "object": "list",
            "data": [
                {"id": GATEWAY_MODEL, "object": "model", "created": 0, "owned_by": "foureyes"}
            ],
        }

    @app.get("/metrics", response_class=Response, responses=_METRICS_RESPONSES)
    async def prometheus_metrics(request: Request, _: AdminKey) -> Response:
        """Prometheus metrics of this instance (text exposition format)."""
        await _publish_budgets(request.app.state.service)
        return Response(metrics.exposition(), media_type=METRICS_CONTENT_TYPE)

    return app


YOUNG_GENERATION_THRESHOLD = 10_000
"""Allocations (net of frees) that start a young-generation collection in a serving process
(CPython's default is 700)."""


def settle_collector() -> None:
    """Make the cyclic garbage collector cheap for a process that has started serving.

    What start-up loaded (the libraries, the app, its routes and config) lives as long as
    the process, about 200,000 objects the collector would walk in every full collection
    and never free: ``gc.freeze`` moves them out of its reach. A reply leaves no cyclic
    garbage behind (measured; benchmarks/README.md, "The collector in a serving process"),
    yet with many replies in flight the young generation fills every few hundred
    allocations and each collection finds nothing, so its threshold is raised to
    :data:`YOUNG_GENERATION_THRESHOLD`. Cycles that rarer paths make (an exception and its
    traceback) are still collected, a little later.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)


def _model_call_metrics(metrics: Metrics) -> Callable[[TraceEvent], None]:
    """The pipeline's observer: each ``model_call`` event counted by role and route."""

    def observe(event: TraceEvent) -> None:
        if event.kind is EventKind.MODEL_CALL:
            data = event.data
            metrics.observe_model_call(
                Role(data["role"]), data["route"], data["latency_ms"] / 1000, data["outcome"]
            )

    return observe


async def _publish_budgets(service: Service) -> None:
    """Set the budget gauges from the ledger: what each route in use has left today.

    Read when scraped rather than on every call, so the hot path never waits for it.
    """
    today = utc_day()
    for name in sorted({service.config.roles.route_for(role) for role in Role}):
        route = service.config.routes[name]
        if route.daily_calls is None and route.daily_budget_usd is None:
            continue
        limit = route_limit(
            name, daily_calls=route.daily_calls, daily_budget_usd=route.daily_budget_usd
        )
        used = await service.store.ledger.usage(limit.key, today)
        service.metrics.set_budget_remaining(
            limit.key,
            None if limit.max_calls is None else limit.max_calls - used.calls - used.reserved_calls,
            None if limit.max_usd is None else limit.max_usd - used.usd - used.reserved_usd,
        )


def _announce(mode: AuthMode, sync: EnvKeySync, server: ServerConfig) -> None:
    """Log the auth mode at start-up; the modes without keys as warnings."""
    if mode is AuthMode.OPEN_LOOPBACK:
        message = (
            f"no API keys: requests without a key are served from this machine only "
            f"(host {server.host}); create one with 'foureyes keys create'"
        )
    elif mode is AuthMode.CLOSED:
        message = (
            "no active API key: every request is refused until one is created "
            "with 'foureyes keys create'"
        )
    else:
        message = "API keys required on every request"
    log_event(
        server_logger,
        "auth_mode",
        level="info" if mode is AuthMode.KEYS else "warning",
        message=message,
        mode=mode.value,
        env_keys_added=list(sync.added),
        env_keys_retired=list(sync.retired),
    )
    if sync.refused:
        log_event(
            server_logger,
            "env_keys_refused",
            level="warning",
            message="keys listed in the environment were revoked earlier and stay refused",
            prefixes=list(sync.refused),
        )
