"""The owner service's HTTP face: one narrow, authenticated API in front of the durable owner.

``foureyes owner serve`` runs :func:`owner_app` in a process of its own, the only one that
holds the owner role's database credential (``[evidence] owner_url``). Two routes:

- ``POST /v1/owner/commit`` with an :class:`~foureyes.evidence.remote.OwnerCommit` and
  ``Authorization: Bearer <token>``: the owner rebuilds the snapshot from its own
  ``[evidence]`` source, judges, renders and writes; 200 with the commit result when it
  committed, 409 when it refused (``status`` says why), 401 without the token, 413 for a
  body over :data:`MAX_BODY_BYTES`, 422 for a body that is not a commit (a record, a slot
  text or a template among its keys included: evidence is never taken from a caller), 503
  when the store failed (nothing was persisted).
- ``GET /v1/owner/health``: ``{"ok": true}``, no token needed, nothing disclosed.
"""

from __future__ import annotations

import hmac

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from foureyes.config import validation_problems
from foureyes.core.errors import StoreError, UsageError
from foureyes.core.strict_json import loads_strict
from foureyes.evidence.durable import DurableOwner
from foureyes.evidence.remote import OWNER_COMMIT_PATH, OwnerCommit
from foureyes.server._logging import log_event, server_logger

__all__ = ["MAX_BODY_BYTES", "owner_app"]

MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest commit body taken (ten thousand selections fit with room to spare)."""


def _problem(status: int, error: str, problems: list[str]) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error, "problems": problems}, status_code=status)


def owner_app(owner: DurableOwner, token: str) -> Starlette:
    """The owner service as an ASGI app committing through ``owner``, behind ``token``.

    Raises:
        UsageError: ``token`` is shorter than 16 characters.
    """
    if len(token) < 16:
        raise UsageError("the owner service's token must have at least 16 characters")
    expected = f"Bearer {token}".encode()

    async def commit(request: Request) -> JSONResponse:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return _problem(401, "Unauthorized", ["a bearer token the owner service knows"])
        raw = await _body(request)
        if raw is None:
            return _problem(413, "TooLarge", [f"a commit is at most {MAX_BODY_BYTES} bytes"])
        try:
            body = OwnerCommit.model_validate(loads_strict(raw), strict=False)
        except ValidationError as exc:
            return _problem(
                422, "ValidationError", validation_problems(exc, OwnerCommit, echo=False)
            )
        except (ValueError, RecursionError) as exc:
            return _problem(422, "ValidationError", [f"the body is not JSON: {exc}"[:300]])
        try:
            result = await owner.commit(
                body.subject, body.claim, tenant=body.tenant, trace_id=body.trace_id
            )
        except UsageError as exc:
            return _problem(422, "ValidationError", [str(exc)])
        except StoreError as exc:
            log_event(server_logger, "owner_store_failed", level="error", exc_info=exc)
            return _problem(503, "StoreError", [str(exc)])
        log_event(
            server_logger,
            "owner_commit",
            trace_id=body.trace_id,
            status=result.status.value,
            accepted=len(result.accepted),
            rejected=len(result.rejected),
            tenant=body.tenant,
        )
        return JSONResponse(result.to_json(), status_code=200 if result.ok else 409)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route(OWNER_COMMIT_PATH, commit, methods=["POST"]),
            Route("/v1/owner/health", health, methods=["GET"]),
        ]
    )


async def _body(request: Request) -> bytes | None:
    """The request body, or ``None`` once it is longer than :data:`MAX_BODY_BYTES`."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
