"""The FastAPI application behind ``foureyes serve``.

This module only wires the service together; capabilities live in their own packages.
Start-up builds every route's provider and opens the store, so a bad config, a missing
API-key variable or an unreachable store stops the server before it accepts a request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from foureyes import __version__
from foureyes.config import Config
from foureyes.core.errors import StoreError
from foureyes.core.roles import Role
from foureyes.llm.routes import Routes
from foureyes.store import Store

__all__ = ["GATEWAY_MODEL", "Service", "create_app"]

GATEWAY_MODEL = "foureyes-support"
"""The model id clients name to reach the guarded support pipeline."""


@dataclass(frozen=True, slots=True)
class Service:
    """Everything a request handler may use, built once at start-up."""

    config: Config
    routes: Routes
    store: Store


def create_app(config: Config, environ: Mapping[str, str]) -> FastAPI:
    """Build the app; providers and the store are opened when it starts, closed when it stops.

    Raises (at start-up, from the lifespan):
        ConfigError: a route cannot be built or a secret variable is not set.
        StoreError: the store cannot be opened or migrated.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        config.require_secrets(environ)
        routes = Routes.build(config, environ)
        try:
            store = await Store.open(config.store, config.privacy, environ)
        except BaseException:
            await routes.aclose()
            raise
        app.state.service = Service(config=config, routes=routes, store=store)
        try:
            yield
        finally:
            await routes.aclose()
            await store.close()

    app = FastAPI(title="foureyes", version=__version__, lifespan=lifespan)

    @app.get("/healthz")
    async def healthz(request: Request) -> JSONResponse:
        """Liveness and readiness: the store answers, and which roles run offline."""
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
        except StoreError as exc:
            body |= {"status": "unavailable", "store": exc.operation}
            return JSONResponse(body, status_code=503)
        body["store"] = service.store.dialect
        return JSONResponse(body)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        """OpenAI-compatible model list: the guarded pipeline is the one model offered."""
        return {
            "object": "list",
            "data": [
                {"id": GATEWAY_MODEL, "object": "model", "created": 0, "owned_by": "foureyes"}
            ],
        }

    return app
