"""Stored evaluation runs and their reports, for the console (admin scope).

- ``GET /v1/evals``: the most recent runs first (``limit``), each with its suite, kind,
  arms and the number of case x arm results stored so far.
- ``GET /v1/evals/{run_id}/report``: the run's report as JSON (:meth:`ReportView.as_json
  <foureyes.evals.report.ReportView.as_json>`: tables as text, plots as base64 PNG), in
  the language of ``lang`` (``en``, ``zh-Hans``, ``zh-Hant``), else of
  ``Accept-Language``.
- ``GET /v1/evals/{run_id}/report.html`` and ``report.md``: the same report as the
  self-contained page or the Markdown summary ``foureyes eval report`` writes, as a
  download.

The runs are the ones ``foureyes eval run`` stored in the same store. An unknown run is
404; a run with no result yet is 409 ``eval_run_empty``. Reports are drawn on a worker
thread, so plotting never holds the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.evals.report import ReportView, html_of, load_metrics, markdown_of, report_view
from foureyes.server.auth import AdminKey
from foureyes.server.console import page_locale
from foureyes.server.errors import ApiError, ErrorCode, error_responses
from foureyes.store import Store
from foureyes.wire.text import Text

__all__ = ["MAX_EVAL_RUNS", "evals_router"]

MAX_EVAL_RUNS = 200
"""The most runs ``GET /v1/evals`` lists at once."""

_RunId = Annotated[Text, Path(min_length=1, max_length=64)]
_MEDIA_TYPES = {"html": "text/html; charset=utf-8", "md": "text/markdown; charset=utf-8"}
_FILES: dict[str, Callable[[ReportView], tuple[str, str]]] = {
    "html": lambda view: (html_of(view), _MEDIA_TYPES["html"]),
    "md": lambda view: (markdown_of(view), _MEDIA_TYPES["md"]),
}
# The page the console offers for download may be opened from disk; served from here it
# is never rendered in the origin's context (it is an attachment, and may run nothing).
_REPORT = error_responses(401, 403, 404, 409, 413, 422, 429, 503)
_FILE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The page or the Markdown, as a download.",
        "content": {media: {"schema": {"type": "string"}} for media in _MEDIA_TYPES.values()},
    },
    **_REPORT,
}
_DOWNLOAD_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"


def evals_router() -> APIRouter:
    """The router of the eval-run endpoints (``app.state.service.store``)."""
    router = APIRouter(tags=["evals"])

    @router.get("/v1/evals", responses=error_responses(401, 403, 413, 422, 429, 503))
    async def list_runs(
        request: Request,
        _: AdminKey,
        limit: Annotated[int, Query(ge=1, le=MAX_EVAL_RUNS)] = 50,
    ) -> dict[str, Any]:
        """Stored eval runs, the most recent first."""
        store: Store = request.app.state.service.store
        runs = await store.evals.runs(limit=limit)
        counts = await store.evals.result_counts([run.run_id for run in runs])
        return {
            "object": "list",
            "data": [
                {
                    "run_id": run.run_id,
                    "suite": run.suite,
                    "kind": run.facts.get("kind"),
                    "arms": [arm.get("name") for arm in run.facts.get("arms", ())],
                    "baseline": run.facts.get("baseline"),
                    "mode": run.facts.get("mode"),
                    "created_at": run.created_at.isoformat(),
                    "results": counts[run.run_id],
                }
                for run in runs
            ],
        }

    @router.get("/v1/evals/{run_id}/report", responses=_REPORT)
    async def report(
        request: Request, run_id: _RunId, _: AdminKey, lang: Text | None = None
    ) -> dict[str, Any]:
        """The run's report as JSON, in the language asked for."""
        view = await _view(request, run_id, lang)
        return view.as_json()

    @router.get("/v1/evals/{run_id}/report.{fmt}", responses=_FILE)
    async def report_file(
        request: Request,
        run_id: _RunId,
        fmt: Literal["html", "md"],
        _: AdminKey,
        lang: Text | None = None,
    ) -> Response:
        """The run's self-contained page or Markdown summary, as a download."""
        view = await _view(request, run_id, lang)
        body, media_type = _FILES[fmt](view)
        return _download(body, media_type, f"{run_id}.{fmt}")

    return router


async def _view(request: Request, run_id: str, lang: str | None) -> ReportView:
    store: Store = request.app.state.service.store
    locale: Locale = page_locale(lang, request.headers.get("accept-language"))
    try:
        run, metrics = await load_metrics(store, run_id)
    except UsageError:  # an unknown run, or one without results: only then tell which
        if await store.evals.get_run(run_id) is None:
            raise ApiError(ErrorCode.NOT_FOUND) from None
        raise ApiError(ErrorCode.EVAL_RUN_EMPTY, run=run_id) from None
    return await asyncio.to_thread(report_view, run, metrics, locale)


def _download(body: str, media_type: str, filename: str) -> Response:
    # The run id may hold any character: the file name is given as RFC 5987 UTF-8.
    quoted = quote(filename, safe="-._")
    headers = {
        "content-disposition": f"attachment; filename*=UTF-8''{quoted}",
        "content-security-policy": _DOWNLOAD_CSP,
        "x-content-type-options": "nosniff",
        "cache-control": "no-store",
    }
    return Response(body, media_type=media_type, headers=headers)
