"""``POST /v1/review``: a masked review of a session sent as JSON (the manual trigger).

The body carries the session either as OpenAI chat-format ``messages`` (with ``tools``)
or as native ``events`` (with ``system`` and ``tools``), plus the window, the mask and
the request mode. The answer is the review as data: the projection's metadata, the
request's prefix share, the outcome (an accepted packet, or none and why) and the
publication message, if the reviewer's policy publishes the packet. A skipped projection
or a review without a packet is a ``200`` result; only a body that is not a session is
an error (``422``).

``POST /v1/review/deliberate`` is its sibling for an agent's ``deliberate`` tool call
(:mod:`foureyes.review.deliberate`): the same session fields, plus the call's raw
``arguments`` string instead of the window, mask and mode. The answer is the call's result:
its status and reason code, whether it is a tool error, the tool result ``content`` to
give the agent, and the review as data (``null`` when the arguments were refused).
Arguments the model got wrong are a ``200`` result with status ``refused``; only a body
that is not a session is a ``422``. The bodies are :mod:`foureyes.wire.review`'s.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from foureyes.review.deliberate import run_deliberate
from foureyes.review.projection import Window
from foureyes.review.reviewer import Reviewer, project_session, projection_json
from foureyes.review.session import Session, SessionFormatError
from foureyes.server.errors import error_responses
from foureyes.wire.review import DeliberateBody, ReviewBody

__all__ = ["DeliberateBody", "ReviewBody", "review_router"]


_SESSION_RULE = (
    "A rule the request schema cannot express: the free-form ``messages`` or ``events`` are "
    "a session of their format (OpenAI chat messages, or native events). A body the schema "
    "allows whose session is not one is a 422 whose ``error.message`` is an object "
    '``{"format", "reason", "detail"}`` (``code`` ``null``). An empty session is not an '
    "error: it is a ``200`` skipped as ``empty_session``."
)


def review_router(reviewer: Callable[[Request], Reviewer]) -> APIRouter:
    """The router serving ``POST /v1/review`` and ``POST /v1/review/deliberate``.

    Args:
        reviewer: returns the :class:`~foureyes.review.reviewer.Reviewer` for a request
            (typically one built at start-up and kept in ``app.state``).
    """
    router = APIRouter()

    async def review(body: ReviewBody, request: Request) -> dict[str, Any]:
        """Review one session through a window and a mask; one reviewer call at most."""
        session = _session(body)
        chosen = reviewer(request)
        window = Window.parse(body.window)
        if body.project_only:
            projection = project_session(
                session, window, body.mask, chosen.config, images=chosen.runner.accepts_images
            )
            return {"ok": True, **projection_json(projection)}
        result = await chosen.review(
            session, window=window, mask=body.mask, mode=body.mode, session_id=body.session_id
        )
        return {"ok": True, **result.as_json()}

    async def deliberate(body: DeliberateBody, request: Request) -> dict[str, Any]:
        """Carry out an agent's ``deliberate`` call on its session; one reviewer call at most."""
        session = _session(body)
        result = await run_deliberate(
            reviewer(request), session, body.arguments, session_id=body.session_id
        )
        return {"ok": True, **result.as_json()}

    responses = error_responses(400, 408, 413, 422)
    responses[422] = responses[422] | {
        "description": f"{responses[422]['description']} {_SESSION_RULE}"
    }
    for path, endpoint in (("/v1/review", review), ("/v1/review/deliberate", deliberate)):
        router.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            tags=["review"],
            responses=responses,
            description=f"{inspect.getdoc(endpoint)}\n\n{_SESSION_RULE}",
        )
    return router


def _session(body: ReviewBody | DeliberateBody) -> Session:
    try:
        return body.session()
    except SessionFormatError as exc:
        problem = {"format": exc.schema, "reason": exc.reason, "detail": exc.detail}
        raise HTTPException(status_code=422, detail=problem) from None
