"""Structured JSON logs: one JSON object per line, with the trace id when it is known.

Records carry identifiers, codes, counts and timings, never text a user or a model wrote.
:func:`log_event` is how foureyes logs; :class:`JsonFormatter` renders any record, ours or a
library's, as one line, and writes an exception as its type and stack only: the message of
a library's exception may quote input (a validation error quotes the value it rejected),
while foureyes' own errors build their messages from fields and are kept.

Nothing is configured on import. ``foureyes serve`` passes :func:`logging_config` to
uvicorn (or calls :func:`configure_logging`), so uvicorn's lines are JSON too.
"""

from __future__ import annotations

import datetime as dt
import logging
import logging.config
import re
import time
import traceback
from typing import Any, Literal

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foureyes.core import strict_json
from foureyes.core.errors import FoureyesError
from foureyes.core.ids import random_hex
from foureyes.server.metrics import route_label

__all__ = [
    "JsonFormatter",
    "LogLevel",
    "RequestLogMiddleware",
    "configure_logging",
    "describe_exception",
    "log_event",
    "logging_config",
    "server_logger",
]

LogLevel = Literal["debug", "info", "warning", "error"]
"""The levels :func:`log_event` takes."""

server_logger = logging.getLogger("foureyes.server")
"""The logger of the HTTP service (requests, start-up, failures)."""

_FIELDS = "foureyes_fields"
_LEVELS: dict[LogLevel, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_MAX_FRAMES = 30
# A request id a client or proxy sends is kept only when it cannot carry text.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def log_event(
    logger: logging.Logger,
    event: str,
    *,
    level: LogLevel = "info",
    message: str | None = None,
    trace_id: str | None = None,
    exc_info: BaseException | None = None,
    **fields: object,
) -> None:
    """Log one event as structured fields.

    Args:
        logger: where to log (usually :data:`server_logger`).
        event: a snake_case name (``http_request``, ``store_unavailable``, ...).
        level: the record's level.
        message: a sentence for people; unformatted handlers print only this.
        trace_id: the run the event belongs to, when there is one.
        exc_info: an exception to describe (type and stack; see :func:`describe_exception`).
        **fields: JSON-serialisable identifiers, codes, counts and timings. Never user or
            model text: put its digest or length here instead.
    """
    number = _LEVELS[level]
    if not logger.isEnabledFor(number):
        return
    payload: dict[str, object] = {"event": event}
    if trace_id is not None:
        payload["trace_id"] = trace_id
    payload.update(fields)
    logger.log(number, message or event, exc_info=exc_info, extra={_FIELDS: payload})


def describe_exception(exc: BaseException) -> dict[str, Any]:
    """An exception as loggable data: its type, its cause's type and its stack.

    The message is included only for foureyes' own errors (built from their fields).
    """
    described: dict[str, Any] = {"type": f"{type(exc).__module__}.{type(exc).__qualname__}"}
    if isinstance(exc, FoureyesError):
        described["message"] = str(exc)
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        described["cause"] = f"{type(cause).__module__}.{type(cause).__qualname__}"
    frames = traceback.extract_tb(exc.__traceback__)[-_MAX_FRAMES:]
    described["stack"] = [f"{f.filename}:{f.lineno} in {f.name}" for f in frames]
    return described


class JsonFormatter(logging.Formatter):
    """Formats each record as one line of JSON.

    Keys: ``ts`` (UTC, milliseconds), ``level``, ``logger``, ``event`` (``log`` for records
    not made by :func:`log_event`), ``message`` when it says more than the event, the
    event's fields, and ``error`` for an exception.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one JSON object without newlines."""
        at = dt.datetime.fromtimestamp(record.created, dt.UTC)
        document: dict[str, Any] = {
            "ts": at.isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, _FIELDS, None)
        message = record.getMessage()
        if isinstance(fields, dict):
            document.update(fields)
            if message != fields.get("event"):
                document["message"] = message
        else:
            document |= {"event": "log", "message": message}
        if record.exc_info is not None and record.exc_info[1] is not None:
            document["error"] = describe_exception(record.exc_info[1])
        return strict_json.dumps(document, ensure_ascii=False, default=str)


def logging_config(level: LogLevel = "info") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` mapping: foureyes and uvicorn log JSON to stderr.

    uvicorn's own access log is silenced: :class:`RequestLogMiddleware` writes one line
    per request with the route template instead of the raw path, which may carry text.
    Pass it to ``uvicorn.run(log_config=...)``.
    """
    name = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "foureyes": {"handlers": ["stderr"], "level": name, "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": name, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def configure_logging(level: LogLevel = "info") -> None:
    """Apply :func:`logging_config` to this process (a process-wide change)."""
    logging.config.dictConfig(logging_config(level))


class RequestLogMiddleware:
    """Gives each request an id and logs one ``http_request`` line when it ends.

    The id is the client's ``X-Request-ID`` when that is a short token, else a new one;
    it is sent back in ``X-Request-ID`` and kept in ``request.state.request_id``. The line
    holds the method, route template, status, duration, the key's prefix
    (``request.state.principal``) and the trace id (``request.state.trace_id``, set by
    handlers that start a run).
    """

    def __init__(self, app: ASGIApp, *, logger: logging.Logger = server_logger) -> None:
        self.app = app
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        supplied = Headers(scope=scope).get("x-request-id")
        request_id = supplied if supplied and _REQUEST_ID.fullmatch(supplied) else random_hex(16)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)["x-request-id"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            principal = state.get("principal")
            trace_id = state.get("trace_id")
            log_event(
                self.logger,
                "http_request",
                trace_id=trace_id if isinstance(trace_id, str) else None,
                request_id=request_id,
                method=scope["method"],
                route=route_label(scope),
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                key=getattr(principal, "prefix", None),
            )
