"""JSON endpoints for evidence-bound facts: select and commit, and read observations back.

``POST /v1/facts/select`` runs one traced facts run (:func:`foureyes.evidence.select_facts`)
and answers with its JSON: ``accepted`` observations rendered by code, ``rejected``
selections with reasons, and any explanation apart, marked as model text that was not
persisted. ``GET /v1/facts/observations?subject=...`` lists what the store holds.

Mount the router made by :func:`facts_router`. With a ``source`` (the application's
:class:`~foureyes.evidence.CatalogSource`) a request names a ``snapshot_id`` and the
server rebuilds the catalog itself; without one, a request posts its ``catalog`` and that
document is the snapshot the owner checks against. Kinds are likewise the server's, when
given, or posted with the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.errors import ConfigError, StoreError
from foureyes.core.locale import Locale
from foureyes.evidence import (
    Catalog,
    CatalogError,
    CatalogSource,
    CommitStatus,
    DurableOwner,
    EvidenceSelector,
    FactsRequest,
    KindRegistry,
    SelectorFailure,
    catalog_from_mapping,
    select_facts,
)
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.store import Store

__all__ = ["FactsServices", "SelectBody", "facts_router"]

_STATUS_CODES: dict[CommitStatus | SelectorFailure, int] = {
    CommitStatus.COMMITTED: 200,
    CommitStatus.CATALOG_UNAVAILABLE: 409,
    CommitStatus.CATALOG_CHANGED: 409,
    CommitStatus.RENDER_MISMATCH: 409,
    SelectorFailure.MALFORMED: 502,
    SelectorFailure.FAILED: 502,
    SelectorFailure.TIMEOUT: 504,
    SelectorFailure.DEADLINE_EXCEEDED: 504,
    SelectorFailure.BUDGET_EXHAUSTED: 429,
}


class FactsServices(Protocol):
    """What the endpoints need from the running service (``server.app.Service`` has it)."""

    @property
    def routes(self) -> Routes:
        """The built routes; the ``selector`` role's serves the selection."""
        ...

    @property
    def store(self) -> Store:
        """The open store: ledger, traces and observations."""
        ...


class SelectBody(BaseModel):
    """Body of ``POST /v1/facts/select``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    subject: str = Field(min_length=1, max_length=256)
    """Whom the facts are about."""
    task: str = Field(default="", max_length=20_000)
    """What the selection serves."""
    locale: Locale = Locale.ZH_HANS
    """Locale of the rendered facts."""
    explain: bool = False
    """Also ask for an explanation (free model text, never persisted)."""
    catalog: dict[str, Any] | None = None
    """The catalog in its pinned JSON form (when the server has no catalog source)."""
    snapshot_id: str | None = Field(default=None, min_length=1, max_length=256)
    """The snapshot to rebuild (when the server has a catalog source)."""
    kinds: dict[str, Any] | None = None
    """Observation kinds by name, as in the ``[kinds.NAME]`` tables of the TOML form
    (when the server has no kinds of its own)."""


class _PostedCatalog:
    """The posted document as the owner's source: it holds exactly one snapshot."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    async def snapshot(self, snapshot_id: str) -> Catalog:
        if snapshot_id != self._catalog.snapshot_id:
            raise CatalogError([f"the posted catalog is not snapshot {snapshot_id!r}"])
        return self._catalog


def _problem(status: int, error: str, problems: list[str]) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error, "problems": problems}, status_code=status)


def facts_router(
    services: Callable[[Request], FactsServices],
    *,
    source: CatalogSource | None = None,
    kinds: KindRegistry | None = None,
) -> APIRouter:
    """The facts endpoints.

    Args:
        services: finds the running service for a request (e.g.
            ``lambda request: request.app.state.service``).
        source: the application's catalog source; requests then name a ``snapshot_id``.
        kinds: the server's kinds; requests then post none.
    """
    router = APIRouter(prefix="/v1/facts", tags=["facts"])

    async def _inputs(body: SelectBody) -> tuple[Catalog, CatalogSource, KindRegistry]:
        if kinds is not None and body.kinds is not None:
            raise ConfigError(["kinds are configured by the server; post none"])
        if kinds is None and body.kinds is None:
            raise ConfigError(["kinds are required"])
        registry = kinds if kinds is not None else KindRegistry.from_mapping({"kinds": body.kinds})
        if source is not None:
            if body.catalog is not None or body.snapshot_id is None:
                raise CatalogError(["name a snapshot_id; the server builds the catalog itself"])
            return await source.snapshot(body.snapshot_id), source, registry
        if body.catalog is None or body.snapshot_id is not None:
            raise CatalogError(["post the catalog; the server has no catalog source"])
        catalog = catalog_from_mapping(body.catalog, where="catalog")
        return catalog, _PostedCatalog(catalog), registry

    @router.post("/select")
    async def select(body: SelectBody, request: Request) -> JSONResponse:
        """Select evidence, validate, render by code, and commit to the store."""
        service = services(request)
        try:
            catalog, owner_source, registry = await _inputs(body)
        except (ConfigError, CatalogError) as exc:
            return _problem(422, type(exc).__name__, list(exc.problems))
        caller = ModelCaller(
            service.routes, ledger=service.store.ledger, trace=service.store.traces
        )
        run = FactsRequest(
            subject=body.subject, task=body.task, locale=body.locale, explain=body.explain
        )
        try:
            outcome = await select_facts(
                catalog,
                run,
                selector=EvidenceSelector(caller, registry),
                owner=DurableOwner(owner_source, registry, service.store.observations),
                traces=service.store.traces,
            )
        except StoreError as exc:
            return _problem(503, "StoreError", [str(exc)])
        return JSONResponse(outcome.to_json(), status_code=_STATUS_CODES[outcome.status])

    @router.get("/observations")
    async def observations(
        request: Request,
        subject: Annotated[str, Query(min_length=1, max_length=256)],
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> JSONResponse:
        """The subject's most recent observations, oldest first."""
        log = services(request).store.observations
        try:
            rows = await log.for_subject(subject, limit=limit)
        except StoreError as exc:
            return _problem(503, "StoreError", [str(exc)])
        return JSONResponse({"subject": subject, "observations": [row.to_json() for row in rows]})

    return router
