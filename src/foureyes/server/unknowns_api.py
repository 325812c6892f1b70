"""JSON endpoints for a conversation's open unknowns: list them, and resolve one explicitly.

- ``GET /v1/conversations/{conversation_id}/unknowns``: the conversation's unknowns, most
  recently raised first (``include_resolved=true`` for the resolved ones too). A text is
  ``null`` when the store keeps none (``privacy.store_raw_text`` off, or past retention).
- ``POST /v1/conversations/{conversation_id}/unknowns/{unknown_id}/resolve``: close one,
  for instance once the application has learnt from the user what the Supervisor lacked.
  It is recorded as resolved by the caller's tenant (``key:<id>``; ``local`` in the
  ``open_loopback`` mode). Resolving one already resolved changes nothing and says so.

``conversation_id`` is the id the caller sends the gateway; it names a conversation of the
caller's own tenant only (:func:`~foureyes.core.tenancy.scoped_conversation`), so one key
can neither read nor resolve another's unknowns. A later verdict resolves unknowns too
(:mod:`foureyes.store.unknowns`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from foureyes.core.tenancy import scoped_conversation
from foureyes.server.auth import ClientKey
from foureyes.server.errors import ApiError, ErrorCode, error_responses
from foureyes.store.unknowns import SqlOpenUnknowns
from foureyes.wire.text import Text

__all__ = ["unknowns_router"]

_Conversation = Annotated[Text, Path(min_length=1, max_length=256)]
_UnknownId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")]


def unknowns_router() -> APIRouter:
    """The router of the open-unknowns endpoints (``app.state.service.store.unknowns``)."""
    router = APIRouter(tags=["unknowns"])

    @router.get(
        "/v1/conversations/{conversation_id}/unknowns",
        responses=error_responses(401, 413, 422, 429, 503),
    )
    async def list_unknowns(
        conversation_id: _Conversation,
        request: Request,
        principal: ClientKey,
        include_resolved: Annotated[bool, Query()] = False,
    ) -> dict[str, Any]:
        """The conversation's unknowns, most recently raised first."""
        unknowns: SqlOpenUnknowns = request.app.state.service.store.unknowns
        conversation = scoped_conversation(principal.tenant, conversation_id)
        entries = await unknowns.entries(conversation, include_resolved=include_resolved)
        return {"object": "list", "data": [entry.as_json() for entry in entries]}

    @router.post(
        "/v1/conversations/{conversation_id}/unknowns/{unknown_id}/resolve",
        responses=error_responses(401, 404, 413, 422, 429, 503),
    )
    async def resolve_unknown(
        conversation_id: _Conversation,
        unknown_id: _UnknownId,
        request: Request,
        principal: ClientKey,
    ) -> dict[str, Any]:
        """Resolve one open unknown; 404 when the conversation has no such unknown."""
        unknowns: SqlOpenUnknowns = request.app.state.service.store.unknowns
        conversation = scoped_conversation(principal.tenant, conversation_id)
        resolved = await unknowns.resolve_id(conversation, unknown_id, resolved_by=principal.tenant)
        entries = await unknowns.entries(conversation, include_resolved=True)
        entry = next((e for e in entries if e.id == unknown_id), None)
        if entry is None:
            raise ApiError(ErrorCode.NOT_FOUND)
        return {"resolved": resolved, "unknown": entry.as_json()}

    return router
