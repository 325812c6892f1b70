"""The wire layer: the endpoints' request models, their translation, and the answers.

Below both the HTTP server (:mod:`foureyes.server`) and the library
(:class:`foureyes.Guard`), above the pipeline: what a request is (pydantic models whose
schemas are the OpenAPI document's), how it becomes a pipeline call, and what an outcome
answers (JSON bodies, decision headers, server-sent events as bytes). It imports no web
framework, so the library and the command line can use it without loading one; the
server only adds HTTP (routes, status codes, streaming responses).

- :mod:`~foureyes.wire.chat`: chat completions, ``/v1/check`` and ``/v1/check/stream``
  requests, :func:`support_message`, :func:`guard_request`, :func:`streamed_draft`;
- :mod:`~foureyes.wire.responses`: completion and check bodies, headers, stream events;
- :mod:`~foureyes.wire.draft_stream`: a caller's model's stream assembled into a draft;
- :mod:`~foureyes.wire.assess`, :mod:`~foureyes.wire.review`: triage and review bodies;
- :mod:`~foureyes.wire.text`: the text types of every request field;
- :mod:`~foureyes.wire.errors`: :class:`InvalidRequest`, a rule the schema cannot express.
"""

from foureyes.wire.assess import AssessBody, HistoryTurn, triage_request
from foureyes.wire.chat import (
    GATEWAY_MODEL,
    MAX_SOURCE_CHARS,
    MAX_SOURCES,
    MAX_TOOL_CALLS,
    MAX_TOOLS,
    ChatCompletionRequest,
    CheckRequest,
    CheckStreamRequest,
    DraftBody,
    DraftFunction,
    DraftToolCall,
    FoureyesOptions,
    InputMessage,
    RequestSource,
    StreamOptions,
    TextContent,
    guard_request,
    streamed_draft,
    support_message,
)
from foureyes.wire.draft_stream import (
    DraftAssembler,
    DraftTooLarge,
    assemble_draft,
    line_problem,
    ndjson_lines,
)
from foureyes.wire.errors import INVALID_REQUEST, InvalidRequest
from foureyes.wire.responses import (
    check_body,
    completion_body,
    decision_headers,
    segment_event,
    sse_chunks,
)
from foureyes.wire.review import DeliberateBody, ReviewBody

__all__ = [
    "AssessBody",
    "ChatCompletionRequest",
    "CheckRequest",
    "CheckStreamRequest",
    "DeliberateBody",
    "DraftAssembler",
    "DraftBody",
    "DraftFunction",
    "DraftTooLarge",
    "DraftToolCall",
    "FoureyesOptions",
    "GATEWAY_MODEL",
    "HistoryTurn",
    "INVALID_REQUEST",
    "InputMessage",
    "InvalidRequest",
    "MAX_SOURCES",
    "MAX_SOURCE_CHARS",
    "MAX_TOOLS",
    "MAX_TOOL_CALLS",
    "RequestSource",
    "ReviewBody",
    "StreamOptions",
    "TextContent",
    "assemble_draft",
    "check_body",
    "completion_body",
    "decision_headers",
    "guard_request",
    "line_problem",
    "ndjson_lines",
    "segment_event",
    "sse_chunks",
    "streamed_draft",
    "support_message",
    "triage_request",
]
