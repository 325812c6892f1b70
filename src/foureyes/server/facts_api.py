"""JSON endpoints for evidence-bound facts: select and commit, and read observations back.

``POST /v1/facts/select`` runs one traced facts run (:func:`foureyes.evidence.select_facts`)
and answers with its JSON: ``accepted`` observations rendered by code, ``rejected``
selections with reasons, and any explanation apart, marked as model text that was not
persisted. ``GET /v1/facts/observations?subject=...`` lists what the store holds.

The request names a subject and a ``snapshot_id``, nothing more: the catalog and the kinds
are the server's own (``[evidence]``, :class:`~foureyes.evidence.ConfiguredEvidence`), so
the durable owner rebuilds the snapshot from the configured source and never from
anything a client posts (invariant 8). A server without ``[evidence]`` answers 404.

The OpenAPI document declares every status ``select`` answers with the body it has: the
facts run's JSON (``200``, and ``409``, ``429``, ``502``, ``504`` by its status), a
:class:`FactsProblem` (``404`` without ``[evidence]``, ``422`` for a snapshot the source
does not hold, ``503`` for a store failure), or the shared ``ErrorBody`` of a request
refused before the handler (its key, its body).

Observations belong to the tenant of the API key that committed them (``key:<id>``;
:data:`~foureyes.core.tenancy.LOCAL_TENANT` for a caller served without a key), and
a ``client`` key reads only its own; the ``admin`` scope reads every tenant's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.errors import StoreError
from foureyes.core.locale import Locale
from foureyes.evidence import (
    CatalogError,
    CommitStatus,
    ConfiguredEvidence,
    EvidenceSelector,
    FactsRequest,
    SelectorFailure,
    select_facts,
)
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.server.auth import ClientKey
from foureyes.server.errors import ErrorBody, error_responses
from foureyes.store import Store
from foureyes.store.api_keys import KeyScope
from foureyes.store.roles import Independence
from foureyes.wire.text import Text

__all__ = ["FactsProblem", "FactsServices", "SelectBody", "facts_router"]

_STATUS_CODES: dict[CommitStatus | SelectorFailure, int] = {
    CommitStatus.COMMITTED: 200,
    CommitStatus.CATALOG_UNAVAILABLE: 409,
    CommitStatus.CATALOG_CHANGED: 409,
    CommitStatus.RENDER_MISMATCH: 409,
    CommitStatus.SUBJECT_UNBOUND: 409,
    CommitStatus.SUBJECT_MISMATCH: 409,
    SelectorFailure.MALFORMED: 502,
    SelectorFailure.FAILED: 502,
    SelectorFailure.TIMEOUT: 504,
    SelectorFailure.DEADLINE_EXCEEDED: 504,
    SelectorFailure.BUDGET_EXHAUSTED: 429,
}
_NOT_CONFIGURED = (
    "this server selects no facts: its config has no [evidence] catalog source and kinds"
)


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

    @property
    def evidence(self) -> ConfiguredEvidence | None:
        """The configured catalog source and kinds; ``None`` without ``[evidence]``."""
        ...

    @property
    def facts_independence(self) -> Independence | None:
        """Whether the owner is a trust boundary here; ``None`` without ``[evidence]``."""
        ...


class SelectBody(BaseModel):
    """Body of ``POST /v1/facts/select``: whom, which snapshot, and how; no evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    subject: Text = Field(min_length=1, max_length=256)
    """Whom the facts are about."""
    snapshot_id: Text = Field(min_length=1, max_length=256)
    """The snapshot of the server's catalog source to select from."""
    task: Text = Field(default="", max_length=20_000)
    """What the selection serves."""
    locale: Locale = Locale.ZH_HANS
    """Locale of the rendered facts."""
    explain: bool = False
    """Also ask for an explanation (free model text, never persisted)."""


class FactsProblem(BaseModel):
    """The body of a facts endpoint's own refusal: what failed and why, never evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    ok: Literal[False]
    """Always ``false``."""
    error: str
    """What failed: ``ConfigError`` (no ``[evidence]``), ``CatalogError`` (the snapshot),
    ``StoreError`` (the store)."""
    problems: list[str]
    """Why, one problem a line."""


_RUN = "The facts run's JSON, as for 200 ({what})."
_SELECT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **error_responses(400, 408),
    404: {
        "model": FactsProblem,
        "description": "``ConfigError``: this server's config has no ``[evidence]``.",
    },
    409: {"description": _RUN.format(what="the commit was refused: its ``status``")},
    422: {
        "model": ErrorBody | FactsProblem,
        "description": (
            "A ``FactsProblem`` (``CatalogError``: the source holds no such snapshot) or, "
            "for a body that breaks the schema, the ``ErrorBody``. "
            + error_responses(422)[422]["description"]
        ),
    },
    429: {
        "model": ErrorBody | dict[str, Any],
        "description": (
            "The key's rate limit (``ErrorBody``: `rate_limit_exceeded`), or the facts "
            "run's JSON when the selector's budget is exhausted."
        ),
    },
    502: {"description": _RUN.format(what="the selector failed or answered malformed JSON")},
    503: {
        "model": ErrorBody | FactsProblem,
        "description": (
            "The store cannot check the key (``ErrorBody``: `store_unavailable`) or "
            "record the run (``FactsProblem``: ``StoreError``)."
        ),
    },
    504: {"description": _RUN.format(what="the selector timed out or the run's deadline passed")},
}
_OBSERVATIONS_RESPONSES: dict[int | str, dict[str, Any]] = {
    **error_responses(422),
    503: {
        "model": ErrorBody | FactsProblem,
        "description": (
            "The store cannot check the key (``ErrorBody``: `store_unavailable`) or read "
            "the observations (``FactsProblem``: ``StoreError``)."
        ),
    },
}


def _problem(status: int, error: str, problems: list[str]) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error, "problems": problems}, status_code=status)


def _independence(service: FactsServices) -> dict[str, Any]:
    """``{"independence": ...}``: whether these facts had an independent owner."""
    found = service.facts_independence
    return {"independence": None if found is None else found.to_json()}


def facts_router(services: Callable[[Request], FactsServices]) -> APIRouter:
    """The facts endpoints, each behind a ``client`` key.

    Args:
        services: finds the running service for a request (e.g.
            ``lambda request: request.app.state.service``).
    """
    router = APIRouter(prefix="/v1/facts", tags=["facts"])

    @router.post("/select", responses=_SELECT_RESPONSES)
    async def select(body: SelectBody, request: Request, principal: ClientKey) -> JSONResponse:
        """Select evidence, validate, render by code, and commit to the store."""
        service = services(request)
        evidence = service.evidence
        if evidence is None:
            return _problem(404, "ConfigError", [_NOT_CONFIGURED])
        try:
            catalog = await evidence.source.snapshot(body.snapshot_id)
        except CatalogError as exc:
            return _problem(422, "CatalogError", list(exc.problems))
        caller = ModelCaller(
            service.routes, ledger=service.store.ledger, trace=service.store.traces
        )
        run = FactsRequest(
            subject=body.subject,
            tenant=principal.tenant,
            task=body.task,
            locale=body.locale,
            explain=body.explain,
        )
        try:
            outcome = await select_facts(
                catalog,
                run,
                selector=EvidenceSelector(caller, evidence.kinds),
                owner=evidence.owner(service.store.observations),
                traces=service.store.traces,
            )
        except StoreError as exc:
            return _problem(503, "StoreError", [str(exc)])
        answer = outcome.to_json() | _independence(service)
        return JSONResponse(answer, status_code=_STATUS_CODES[outcome.status])

    @router.get("/observations", responses=_OBSERVATIONS_RESPONSES)
    async def observations(
        request: Request,
        principal: ClientKey,
        subject: Annotated[Text, Query(min_length=1, max_length=256)],
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> JSONResponse:
        """The subject's most recent observations of this key (admin: of every key)."""
        service = services(request)
        log = service.store.observations
        tenant = None if principal.scope is KeyScope.ADMIN else principal.tenant
        try:
            rows = await log.for_subject(subject, tenant=tenant, limit=limit)
        except StoreError as exc:
            return _problem(503, "StoreError", [str(exc)])
        listed = [row.to_json() for row in rows]
        return JSONResponse({"subject": subject, "observations": listed} | _independence(service))

    return router
