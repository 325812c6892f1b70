"""JSON endpoints beside the gateway: recorded runs (admin) and risk assessment (client).

- ``GET /v1/traces/{trace_id}``: one run, as :func:`foureyes.pipeline.trace_view` draws
  it (header, every event, and a per-stage summary).
- ``GET /v1/traces``: recent runs, newest first, each with its tenant (``key:<key id>``,
  ``local``), filtered by ``purpose`` (``chat``, ``eval`` or ``other``:
  :data:`foureyes.store.trace_list.RUN_PURPOSES`), ``kind``, ``tenant``, ``reason``,
  ``outcome``, ``risk_level`` (a level or ``unknown``), ``conversation_id`` (a tenant's
  own id: every tenant's runs with that id unless ``tenant`` is given), ``since`` and
  ``until`` (ISO 8601 with a zone, to the millisecond) and paged with ``before`` (the
  ``next_before`` of the previous page).
- ``POST /v1/assess``: triage one text (L0, then L1/L2 when L0 escalates) and answer the
  result, the policy the pipeline would apply, and code-rendered crisis resources when
  that policy calls for them. Nothing is generated for the user. The conversation is the
  caller's own (kept under its key's tenant), as in the gateway. Its body is
  :class:`~foureyes.wire.assess.AssessBody`.

Both trace endpoints need an ``admin`` key: they show every tenant's runs. A ``client``
key gets 403, whatever tenant it names.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BeforeValidator

from foureyes.core.policy import GenerationPolicy
from foureyes.pipeline import SupportPipeline, apply_floor, trace_view
from foureyes.risk.resources import render_resources
from foureyes.server.auth import AdminKey, ClientKey
from foureyes.server.errors import ApiError, ErrorCode, error_responses
from foureyes.store.trace_list import MAX_LIST, TENANT_MAX, RunFilter
from foureyes.store.traces import SqlTraceWriter
from foureyes.wire.assess import AssessBody, HistoryTurn, triage_request
from foureyes.wire.text import Text

__all__ = ["AssessBody", "HistoryTurn", "api_router"]

_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def _moment(value: object) -> object:
    # Only an ISO 8601 time with a zone, as documented: pydantic alone would also read a
    # number ("0.5", "1700000000") as a Unix time, which the schema does not promise.
    if not isinstance(value, str):
        return value
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("give an ISO 8601 time (e.g. 2026-11-30T12:00:00Z)") from None
    if moment.tzinfo is None:
        raise ValueError("give a time zone (e.g. 2026-11-30T12:00:00Z)")
    return moment


_Moment = Annotated[dt.datetime | None, BeforeValidator(_moment)]
_Level = Literal["low", "medium", "high", "critical", "unknown", "unscreened"]
_Filter = Annotated[Text | None, Query(min_length=1, max_length=256)]
_Tenant = Annotated[Text | None, Query(min_length=1, max_length=TENANT_MAX)]


def api_router() -> APIRouter:
    """The router of the trace and assessment endpoints (``app.state.service``)."""
    router = APIRouter(tags=["api"])

    @router.get(
        "/v1/traces/{trace_id}", responses=error_responses(401, 403, 404, 413, 422, 429, 503)
    )
    async def get_trace(
        trace_id: Annotated[Text, Path()], request: Request, _: AdminKey
    ) -> dict[str, Any]:
        """One recorded run: header, every event, and the summary the console draws."""
        traces: SqlTraceWriter = request.app.state.service.store.traces
        record = await traces.get(trace_id) if _TRACE_ID.fullmatch(trace_id) else None
        if record is None:
            raise ApiError(ErrorCode.NOT_FOUND)
        return trace_view(record)

    @router.get("/v1/traces", responses=error_responses(401, 403, 413, 422, 429, 503))
    async def list_traces(
        request: Request,
        _: AdminKey,
        purpose: Literal["chat", "eval", "other"] | None = None,
        kind: _Filter = None,
        tenant: _Tenant = None,
        reason: _Filter = None,
        outcome: _Filter = None,
        risk_level: _Level | None = None,
        conversation_id: _Filter = None,
        since: Annotated[_Moment, Query()] = None,
        until: Annotated[_Moment, Query()] = None,
        before: Annotated[str | None, Query(pattern=r"^[0-9a-f]{32}$")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 50,
    ) -> dict[str, Any]:
        """Recent runs of every tenant (or of ``tenant``), newest first, with their triage."""
        traces: SqlTraceWriter = request.app.state.service.store.traces
        where = RunFilter(
            purpose=purpose,
            kind=kind,
            tenant=tenant,
            reason=reason,
            outcome=outcome,
            risk_level=risk_level,
            conversation_id=conversation_id,
            since=since,
            until=until,
            before=before,
        )
        runs = await traces.list_runs(where, limit=limit)
        return {
            "object": "list",
            "data": [run.as_json() for run in runs],
            "next_before": runs[-1].trace_id if len(runs) == limit else None,
        }

    @router.post("/v1/assess", responses=error_responses(400, 401, 408, 413, 422, 429, 503))
    async def assess(body: AssessBody, request: Request, principal: ClientKey) -> dict[str, Any]:
        """Triage one text; the result, the policy that would apply, and any resources."""
        service = request.app.state.service
        pipeline: SupportPipeline = service.pipeline
        result = await pipeline.triage.assess(triage_request(body, tenant=principal.tenant))
        if result.trace_id is not None:
            request.state.trace_id = result.trace_id
        service.metrics.record_risk(result.tier.value, result.level)
        applied = apply_floor(result)
        document = result.as_dict(with_evidence=True) | {"applied_policy": applied.as_json()}
        if applied.policy is not GenerationPolicy.NORMAL:
            region = body.region or service.config.gate.region
            document["resources"] = render_resources(result.locale, region, pipeline.registry)
        return document

    return router
