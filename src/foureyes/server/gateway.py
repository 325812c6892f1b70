"""``POST /v1/chat/completions``: the OpenAI-compatible door to the support pipeline.

Point any OpenAI client at foureyes (``base_url=http://host:port/v1``, model
``foureyes-support``) and every message is triaged and every reply passes the release
gate. The request is OpenAI's; the last message must be the user's. Earlier ``user`` and
``assistant`` messages are the conversation's history. What drafts the reply is
``[server] mode``:

- ``support`` (the default): foureyes' Counselor, from its own prompt. ``system`` and
  ``developer`` messages and ``tools`` are accepted and ignored; the answer names what
  was ignored in ``X-Foureyes-Ignored`` (``system``, ``developer``, ``tools``).
- ``guard``: the request as it is (every message in order, ``tools``, ``tool_choice``)
  goes to the route the ``counselor`` role names, the team's own model, through the
  metered caller (route limits, budgets, the run's deadline, telemetry and trace); that
  model's reply, text and tool calls, is judged like a ``/v1/check`` draft (triage of the
  last user message, the Supervisor, one commit). A message L0 escalates reaches the
  team's model only once triage allows generation, so a confirmed crisis never does.
  The answer's ``message.tool_calls`` (``finish_reason: "tool_calls"``) are the draft's,
  only when released; a fallback carries none. The route's own ``max_tokens`` and
  ``temperature`` apply, not the request's. A second turn's ``tool`` messages (each
  answering an earlier assistant message's ``tool_calls`` id) are taken and forwarded;
  the Supervisor sees them, and the earlier calls, as data. Support mode refuses them.

Which
conversation a message belongs to is ``foureyes.conversation_id`` in the body (the
``openai`` SDK sends it with ``extra_body={"foureyes": {"conversation_id": ...}}``), else
``user``; without either the message is a conversation of its own. Conversation ids are
the caller's own: they are kept under the caller's tenant (its API key; ``local`` in
open-loopback mode), so another key using the same id has another conversation.

The response is OpenAI's, with one more object (docs/design.md 5)::

    "foureyes": {"decision": "released" | "fallback", "reason": code,
                 "candidate_sha256": hex | null, "delivered_sha256": hex,
                 "trace_id": str, "policy": "normal" | "restricted" | "prohibited",
                 "risk": {"status", "level", "confirmed", "tier"}}

The decision is also in the headers of a non-streamed answer: ``X-Foureyes-Decision``,
``X-Foureyes-Reason`` and ``X-Foureyes-Delivered-Sha256`` (with ``X-Foureyes-Trace-Id``),
so a client that drops unknown body fields can still read it.

``stream: true`` answers with server-sent events, but only once the decision is made and
recorded: not a byte (not even the status line) is sent before, so a stream can only
ever carry released text (and, in guard mode, released tool calls: one delta each, after
the text) or the fallback. Every chunk carries the ``foureyes`` object (in whole release;
in segment release, below, only the chunks after the last segment do); a stream's
headers carry only ``X-Foureyes-Trace-Id`` (and ``X-Foureyes-Ignored``; read the decision
from the final chunk's ``foureyes`` object). A store that cannot record the run answers 503 and
delivers nothing (invariant 10).

With ``[gate] release = "segments"`` a support-mode stream whose policy is ``normal`` is the
exception: each segment is sent once it is approved and its record committed
(:class:`_SegmentStream`, :func:`segment_event`), then the fallback continuation if the
gate stopped, then the final chunk with the decision (docs/gateway.md, "Segment release").

``foureyes.sources`` (at most :data:`~foureyes.wire.chat.MAX_SOURCES`, each
``{"id", "text", "origin"?}`` with at most :data:`~foureyes.wire.chat.MAX_SOURCE_CHARS`
characters of text) is the material a reply may rely on (retrieved documents, records):
the Supervisor sees it as data.

``POST /v1/check`` takes the same ``messages``, ``user`` and ``foureyes`` options plus
the caller's own ``draft`` (``{"content": str | null, "tool_calls": [...]}``, OpenAI's
assistant-message fields) and answers the decision on that draft, under the same key,
rate limit, triage (single flight and daily limits per conversation, kept under the
key's tenant) and record as a chat completion; nothing is drafted::

    {"object": "foureyes.check", "decision", "reason", "content", "tool_calls",
     "candidate_sha256", "delivered_sha256", "trace_id", "policy", "risk"}

``content`` is what to deliver: the draft as released (with the code-rendered resources
a restricted policy requires) or the fallback; ``tool_calls`` are the draft's calls,
arguments re-serialised canonically, only when released (else ``null``).
``candidate_sha256`` covers the draft's text and tool calls
(:func:`foureyes.gate.candidate_bytes`). A tool call whose arguments are not strict JSON
is a 422 naming the call, before anything runs.

``POST /v1/check/stream`` is its twin for a draft the caller streams in: an NDJSON body
whose first line is a :class:`CheckStreamRequest` (the check request without ``draft``)
and whose further lines are the caller's model's ``chat.completion.chunk`` objects,
assembled by :func:`streamed_draft` (:mod:`foureyes.wire.draft_stream`) and judged by the
same ``SupportPipeline.check``. A bad first line is a 400/422 before anything runs; a
stream cut off, or a later line that is no chunk, is decided and recorded as a fallback
(``draft_failed``). The answer is an event stream as for ``stream: true``, sent after
the decision, its headers naming only the trace.

This module speaks HTTP only: the request models, their translation into pipeline calls
and the answers' bodies and events are the wire layer's (:mod:`foureyes.wire.chat`,
:mod:`foureyes.wire.responses`), shared with :class:`foureyes.Guard`.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.requests import ClientDisconnect

from foureyes.core.locale import Locale
from foureyes.pipeline import SupportMessage, SupportOutcome, SupportPipeline
from foureyes.server._fast_route import FastJsonRoute
from foureyes.server._logging import log_event, server_logger
from foureyes.server.auth import ClientKey
from foureyes.server.errors import (
    ApiError,
    ErrorCode,
    error_responses,
    locale_from_accept_language,
)
from foureyes.server.metrics import Metrics
from foureyes.wire.chat import (
    GATEWAY_MODEL,
    ChatCompletionRequest,
    CheckRequest,
    CheckStreamRequest,
    guard_request,
    streamed_draft,
    support_message,
)
from foureyes.wire.draft_stream import DraftTooLarge, line_problem, ndjson_lines
from foureyes.wire.responses import (
    check_body,
    completion_body,
    decision_headers,
    segment_event,
    sse_chunks,
)

__all__ = ["gateway_router", "stream_head"]


def _header(description: str) -> dict[str, Any]:
    return {"description": description, "schema": {"type": "string"}}


_TRACE_HEADER = {
    "X-Foureyes-Trace-Id": _header("The recorded run (``GET /v1/traces/{trace_id}``).")
}
_DECISION_HEADERS = _TRACE_HEADER | {
    "X-Foureyes-Decision": _header(
        "``released`` or ``fallback``, as the body's ``foureyes.decision``; not sent on a "
        "stream (read the final chunk's ``foureyes`` object)."
    ),
    "X-Foureyes-Reason": _header(
        "The reason code, as ``foureyes.reason`` (``approved`` or the fallback's reason); "
        "not sent on a stream."
    ),
    "X-Foureyes-Delivered-Sha256": _header(
        "SHA-256 of the delivered text, as ``foureyes.delivered_sha256``; not sent on a stream."
    ),
}
# What a JSON schema cannot say (a rule across messages, or on a string's JSON), in each
# operation's description and its 422: a request the schema allows is refused only so.
_RULES_LAST = "the last message is the user's, with text (``messages``)"


def _tool_rules(*drafts: str) -> str:
    calls = ", ".join(f"``{param}``" for param in ("messages.<i>.tool_calls.<j>", *drafts))
    return (
        "only an assistant message makes tool calls (``messages.<i>.tool_calls``); a ``tool`` "
        "message answers a call that an earlier assistant message made "
        "(``messages.<i>.tool_call_id``): a tool result without its call is refused, never "
        "passed on as if it had been called; a call's ``arguments`` are strict JSON and no "
        f"call id repeats ({calls})"
    )


def _rules(*rules: str) -> str:
    return (
        "Rules the request schema cannot express, each a 422 ``invalid_request`` whose "
        "``param`` names the field: " + "; ".join(rules) + "."
    )


_CHAT_RULES = _rules(
    _RULES_LAST,
    "in ``support`` mode no ``tool`` message and no ``tool_calls`` (``messages.<i>``); in "
    "``guard`` mode " + _tool_rules(),
)
_CHECK_RULES = _rules(_RULES_LAST, _tool_rules("draft.tool_calls.<j>"))
_STREAM_RULES = _rules(
    "on the first line, " + _RULES_LAST,
    _tool_rules() + "; a later line that is no chunk, or a draft that is not whole, is a "
    "fallback (``draft_failed``), not an error",
)
_RULES_422 = (
    " Also `invalid_request` for a request the schema allows that breaks a rule the "
    "operation's description lists (e.g. a ``tool`` message that answers no earlier call: "
    "``param`` ``messages.<i>.tool_call_id``)."
)


def _with_rules(responses: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    refused = responses[422] | {"description": responses[422]["description"] + _RULES_422}
    return responses | {422: refused}


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The completion; with ``stream: true`` the server-sent events.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
        "headers": _DECISION_HEADERS
        | {
            "X-Foureyes-Ignored": _header(
                "Support mode only: what of the request was ignored, comma-separated "
                "(``system``, ``developer``, ``tools``)."
            )
        },
    },
    **error_responses(400, 401, 404, 408, 413, 422, 429, 503),
}
_CHECK_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The decision on the draft, and what to deliver.",
        "headers": _DECISION_HEADERS,
    },
    **error_responses(400, 401, 408, 413, 422, 429, 503),
}
_CHECK_STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "Server-sent events in chat-completion chunk format, sent once the decision is "
            "made and recorded: the text to deliver, the released tool calls, a final chunk "
            "(each chunk carries the ``foureyes`` decision object), then ``[DONE]``."
        ),
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
        "headers": _TRACE_HEADER,
    },
    **error_responses(400, 401, 408, 413, 422, 429, 503),
}
_RESPONSES = _with_rules(_RESPONSES)
_CHECK_RESPONSES = _with_rules(_CHECK_RESPONSES)
_CHECK_STREAM_RESPONSES = _with_rules(_CHECK_STREAM_RESPONSES)
_TAGS: list[str | enum.Enum] = ["gateway"]
_NDJSON_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": (
            "Newline-delimited JSON, read as it arrives. Line 1: a CheckStreamRequest "
            "(``messages``, ``user``, ``foureyes``, as for /v1/check without ``draft``). "
            "Every further line: an OpenAI ``chat.completion.chunk`` of the caller's model. "
            "The end of the body is the end of the draft."
        ),
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
    }
}


def stream_head(line: object) -> CheckStreamRequest:
    """The first line of a ``POST /v1/check/stream`` body (from :func:`ndjson_lines`).

    Raises:
        ApiError: 400 ``invalid_json`` when the body is empty or its first line is not JSON.
        RequestValidationError: the line is not a :class:`CheckStreamRequest` (422, in the
            shape every request body's validation error has).
    """
    if line is None:
        raise ApiError(ErrorCode.INVALID_JSON, detail="the body has no first line")
    if (problem := line_problem(line)) is not None:
        raise ApiError(ErrorCode.INVALID_JSON, detail=f"line 1: {problem}")
    try:
        return CheckStreamRequest.model_validate(line)
    except ValidationError as exc:
        errors = [error | {"loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors, body=line) from None


class _SegmentStream:
    """A support message answered in segment release.

    The pipeline runs as a task; each approved segment, recorded durably before it is
    passed on, waits in a queue until the response sends it. A client that leaves does
    not stop the run: it finishes and is recorded.
    """

    def __init__(self, pipeline: SupportPipeline, message: SupportMessage) -> None:
        self._segments: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.trace_id = ""
        self.task = asyncio.ensure_future(pipeline.handle(message, on_segment=self._put))
        _running.add(self.task)
        self.task.add_done_callback(_running.discard)

    async def _put(self, trace_id: str, segment: str) -> None:
        self._segments.put_nowait((trace_id, segment))

    async def next(self) -> str | None:
        """The next approved segment, or ``None`` once the run has ended without one.

        Raises:
            StoreError: the run could not be recorded (from the task, before a first
                segment); nothing more may be sent.
        """
        if self._segments.empty() and not self.task.done():
            getter = asyncio.ensure_future(self._segments.get())
            try:
                await asyncio.wait([getter, self.task], return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                self._segments.put_nowait(getter.result())
        if self._segments.empty():
            self.task.result()  # a failed run raises here; nothing more is sent
            return None
        self.trace_id, segment = self._segments.get_nowait()
        return segment

    async def events(
        self, first: str, *, created: int, include_usage: bool
    ) -> AsyncIterator[bytes]:
        """The segments as they are approved, then the rest of the outcome's stream."""
        sent: list[str] = []
        segment: str | None = first
        ended = False
        try:
            while segment is not None:
                yield segment_event(
                    self.trace_id, created=created, segment=segment, index=len(sent)
                )
                sent.append(segment)
                segment = await self.next()
            outcome = self.task.result()
            for event in sse_chunks(
                outcome, created=created, include_usage=include_usage, sent="".join(sent)
            ):
                yield event
            ended = True
        finally:
            if not ended:
                # The client left (or the run failed) mid-stream; the run goes on and is
                # recorded, and what was sent was recorded before it was sent.
                log_event(
                    server_logger,
                    "stream_interrupted",
                    trace_id=self.trace_id,
                    segments_sent=len(sent),
                )


_running: set[asyncio.Future[SupportOutcome]] = set()


def _report(metrics: Metrics, outcome: SupportOutcome) -> None:
    metrics.record_decision(outcome.reason)
    triage = outcome.triage
    metrics.record_risk(triage.tier.value, triage.level)


_MODEL_NOT_FOUND = {
    Locale.EN: "The model {model!r} does not exist; this service offers {offered!r}.",
    Locale.ZH_HANS: "模型 {model!r} 不存在；本服务提供的模型是 {offered!r}。",
    Locale.ZH_HANT: "模型 {model!r} 不存在；本服務提供的模型是 {offered!r}。",
}


def _model_not_found(request: Request, model: str) -> JSONResponse:
    locale = locale_from_accept_language(request.headers.get("accept-language"))
    message = _MODEL_NOT_FOUND[locale].format(model=model[:100], offered=GATEWAY_MODEL)
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    return JSONResponse({"error": error}, status_code=404)


def _recorded(request: Request, outcome: SupportOutcome) -> None:
    """What every decided request reports: its trace for the request log, its metrics."""
    request.state.trace_id = outcome.trace_id
    _report(request.app.state.service.metrics, outcome)


def gateway_router(router: APIRouter | None = None) -> APIRouter:
    """The routes of ``POST /v1/chat/completions``, ``/v1/check`` and ``/v1/check/stream``.

    All run through ``app.state.service.pipeline``: the same triage, gate and record.
    They are added to ``router`` when one is given, else to a new router, which is returned
    either way. ``create_app`` gives the app's own router (see there), and on a given
    router ``/v1/chat/completions``' well-formed requests skip FastAPI's solving
    (``_fast_route``): give no router that is later included with dependencies of its
    own, which that would not run. A new router's routes are FastAPI's alone.
    """
    fast = FastJsonRoute if router is not None else None
    router = APIRouter() if router is None else router

    async def chat_completions(
        body: ChatCompletionRequest, request: Request, principal: ClientKey
    ) -> Response:
        """Answer the conversation's last user message through triage and the gate."""
        if body.model != GATEWAY_MODEL:
            return _model_not_found(request, body.model)
        service = request.app.state.service
        guard_mode = service.config.server.mode == "guard"
        message = support_message(body, tenant=principal.tenant, tool_turns=guard_mode)
        pipeline: SupportPipeline = service.pipeline
        dropped = [] if guard_mode else body.ignored()
        ignored = {"x-foureyes-ignored": ",".join(dropped)} if dropped else {}
        segmented = body.stream and service.config.gate.release == "segments"
        if segmented and not guard_mode:
            # Segment release: segments are sent as they are approved and recorded.
            streaming = _SegmentStream(pipeline, message)
            first = await streaming.next()
            if first is not None:
                return _segment_response(request, streaming, first, body, ignored)
            outcome = streaming.task.result()
        elif guard_mode:
            outcome = await pipeline.guard(message, guard_request(body, message))
        else:
            outcome = await pipeline.handle(message)
        _recorded(request, outcome)
        created = int(time.time())
        if not body.stream:
            return JSONResponse(
                completion_body(outcome, created=created),
                headers=decision_headers(outcome) | ignored,
            )
        # A stream names only its trace in headers: a stream of text still arriving (a
        # draft streamed in) sends them before its decision exists, so every stream's
        # decision is read from its final chunk's ``foureyes`` object.
        headers = {"x-foureyes-trace-id": outcome.trace_id} | ignored
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        events = sse_chunks(outcome, created=created, include_usage=include_usage)
        return StreamingResponse(
            _send(events, outcome.trace_id),
            media_type="text/event-stream",
            headers=headers | {"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    router.add_api_route(
        "/v1/chat/completions",
        chat_completions,
        methods=["POST"],
        response_model=None,
        responses=_RESPONSES,
        description=_described(chat_completions, _CHAT_RULES),
        tags=_TAGS,
        route_class_override=fast,
    )

    async def check(body: CheckRequest, request: Request, principal: ClientKey) -> Response:
        """Triage the conversation's last user message and judge the caller's own draft."""
        message = support_message(body, tenant=principal.tenant, tool_turns=True)
        draft = body.given_draft()
        pipeline: SupportPipeline = request.app.state.service.pipeline
        outcome = await pipeline.check(message, draft)
        _recorded(request, outcome)
        return JSONResponse(check_body(outcome), headers=decision_headers(outcome))

    router.add_api_route(
        "/v1/check",
        check,
        methods=["POST"],
        response_model=None,
        responses=_CHECK_RESPONSES,
        description=_described(check, _CHECK_RULES),
        tags=_TAGS,
    )

    async def check_stream(request: Request, principal: ClientKey) -> Response:
        """Judge a draft the caller streams in (NDJSON: the request, then its chunks)."""
        lines = ndjson_lines(request.stream())
        service = request.app.state.service
        limit = service.config.server.max_body_bytes
        try:
            head = stream_head(await anext(lines, None))
            message = support_message(head, tenant=principal.tenant, tool_turns=True)
            draft = await streamed_draft(lines, max_chars=limit)
        except DraftTooLarge:
            raise ApiError(ErrorCode.REQUEST_TOO_LARGE, limit=limit) from None
        except ClientDisconnect:
            # Nothing was decided, so nothing is recorded and nothing can be sent.
            log_event(server_logger, "check_stream_abandoned")
            raise ApiError(ErrorCode.BAD_REQUEST, detail="the client left mid-draft") from None
        pipeline: SupportPipeline = service.pipeline
        outcome = await pipeline.check(message, draft)
        _recorded(request, outcome)
        # As every stream: the decision is in the chunks' ``foureyes`` object (the
        # final one included), the headers name only the trace.
        events = sse_chunks(outcome, created=int(time.time()), include_usage=False)
        return StreamingResponse(
            _send(events, outcome.trace_id),
            media_type="text/event-stream",
            headers={
                "x-foureyes-trace-id": outcome.trace_id,
                "cache-control": "no-cache",
                "x-accel-buffering": "no",
            },
        )

    router.add_api_route(
        "/v1/check/stream",
        check_stream,
        methods=["POST"],
        response_model=None,
        responses=_CHECK_STREAM_RESPONSES,
        openapi_extra=_NDJSON_BODY,
        description=_described(check_stream, _STREAM_RULES),
        tags=_TAGS,
    )
    return router


def _described(endpoint: Callable[..., Any], rules: str) -> str:
    """An operation's description: its docstring, then the rules its schema cannot express."""
    return f"{inspect.getdoc(endpoint)}\n\n{rules}"


def _segment_response(
    request: Request,
    streaming: _SegmentStream,
    first: str,
    body: ChatCompletionRequest,
    ignored: dict[str, str],
) -> StreamingResponse:
    request.state.trace_id = streaming.trace_id
    metrics = request.app.state.service.metrics

    def report(task: asyncio.Future[SupportOutcome]) -> None:
        if not task.cancelled() and task.exception() is None:
            _report(metrics, task.result())

    streaming.task.add_done_callback(report)
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    events = streaming.events(first, created=int(time.time()), include_usage=include_usage)
    headers = {"x-foureyes-trace-id": streaming.trace_id, "cache-control": "no-cache"}
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers=headers | {"x-accel-buffering": "no"} | ignored,
    )


async def _send(events: list[bytes], trace_id: str) -> AsyncIterator[bytes]:
    sent = 0
    try:
        for event in events:
            yield event
            sent += 1
    finally:
        if sent < len(events):
            # The client left mid-stream; the run's record is complete already.
            log_event(
                server_logger,
                "stream_interrupted",
                trace_id=trace_id,
                chunks_sent=sent,
                chunks=len(events),
            )
