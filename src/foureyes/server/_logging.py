"""Structured JSON logs: one JSON object per line, with the trace id when it is known.

Records carry identifiers, codes, counts and timings, never text a user or a model wrote.
:func:`log_event` is how foureyes logs; :class:`JsonFormatter` renders any record, ours or a
library's, as one line, and writes an exception as its type and stack only: the message of
a library's exception may quote input (a validation error quotes the value it rejected),
while foureyes' own errors build their messages from fields and are kept.

Nothing is configured on import. ``foureyes serve`` passes :func:`logging_config` to
uvicorn (or calls :func:`configure_logging`), so uvicorn's lines are JSON too. Its lines go
through :class:`QueuedStreamHandler`: a log sink that stops reading (a full pipe, a stuck
collector) costs log lines, counted, never the event loop. A host process that imports
foureyes as a library gets no handler at all (the ``foureyes`` logger has a
``NullHandler``): where its lines go, and whether that can block, is the host's choice.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import logging.config
import os
import queue
import re
import select
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Sequence
from typing import IO, Any, Literal

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foureyes.core import strict_json
from foureyes.core.errors import FoureyesError
from foureyes.core.ids import random_hex
from foureyes.server.metrics import route_label

__all__ = [
    "DEFAULT_LOG_QUEUE_LINES",
    "JsonFormatter",
    "LogLevel",
    "QueuedStreamHandler",
    "RequestLogMiddleware",
    "configure_logging",
    "describe_exception",
    "dropped_log_lines",
    "log_event",
    "logging_config",
    "server_logger",
]

LogLevel = Literal["debug", "info", "warning", "error"]
"""The levels :func:`log_event` takes."""

server_logger = logging.getLogger("foureyes.server")
"""The logger of the HTTP service (requests, start-up, failures)."""

DEFAULT_LOG_QUEUE_LINES = 10_000
"""Lines a :class:`QueuedStreamHandler` holds for its writer before it drops new ones."""

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


class _Drops:
    """Log lines dropped in this process, by every :class:`QueuedStreamHandler` in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0

    def add(self, count: int) -> int:
        with self._lock:
            self.total += count
            return self.total


_drops = _Drops()
_BATCH_LINES = 512
_NOTE_EVERY_S = 1.0
"""While lines keep being dropped, how often the writer says so (else: once it caught up)."""
_CLOSE_WAIT_S = 2.0
"""How long closing (or flushing) waits for a writer that makes no progress."""


def dropped_log_lines() -> int:
    """Log lines this process dropped because a log sink did not keep up or failed."""
    return _drops.total


class QueuedStreamHandler(logging.Handler):
    """Writes formatted lines to a stream from a thread of its own; never blocks the caller.

    A record is formatted on the thread that logs it and put on a queue of ``capacity``
    lines; a daemon thread writes what is queued, in batches. When the queue is full (the
    sink stopped reading, or reads more slowly than lines come) a new line is dropped and
    counted (:func:`dropped_log_lines`, ``foureyes_log_lines_dropped_total``) instead of
    waited for, and so is a line whose write failed. Once the writer has caught up, and at
    most every second while lines are still being dropped, it writes one
    ``log_lines_dropped`` line with the count since the last such line. Lines are written
    to the stream's file descriptor when it has one, so a writer blocked on a full pipe
    holds none of the stream's locks (the interpreter can still exit).

    A process ended by ``SIGTERM``'s default action runs no ``atexit`` hook, so whatever is
    still queued would be lost; uvicorn ends that way after a graceful shutdown (it puts
    back the handler it found and raises the signal again), and the lines it logs last
    ("Finished server process") are the ones still queued. With ``flush_on_terminate``
    the handler, built on the main thread of a process whose ``SIGTERM`` still has its
    default action, installs one that writes what is queued (a bounded wait) and then
    ends the process as the default action would.

    Args:
        stream: where lines go (``sys.stderr`` by default).
        capacity: lines queued at most (``[server] log_queue_lines``).
        flush_on_terminate: install the ``SIGTERM`` handler described above (``serve``,
            which owns its process, does; a handler built for a host process should not).
    """

    def __init__(
        self,
        stream: IO[str] | None = None,
        capacity: int = DEFAULT_LOG_QUEUE_LINES,
        *,
        flush_on_terminate: bool = False,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        super().__init__()
        self.stream = sys.stderr if stream is None else stream
        self._fd: int | None = None
        with contextlib.suppress(AttributeError, OSError, ValueError):
            self._fd = self.stream.fileno()
        self._queue: queue.Queue[str] = queue.Queue(maxsize=capacity)
        self._unsaid = 0
        self._unsaid_lock = threading.Lock()
        self._closing = threading.Event()
        self._writer = threading.Thread(target=self._run, name="foureyes-log-writer", daemon=True)
        self._writer.start()
        _flushed_on_terminate.add(self)
        if flush_on_terminate:
            _install_terminate_flush()

    def emit(self, record: logging.LogRecord) -> None:
        """Queue ``record`` as one line, or count it dropped; never waits."""
        try:
            line = self.format(record)
        except Exception:  # not handleError: it writes a traceback to stderr, blocking
            self._drop(1)
            return
        if self._closing.is_set():
            self._drop(1)
            return
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            self._drop(1)

    def flush(self) -> None:
        """Wait until every line queued so far is written (or counted dropped).

        A line the writer has taken off the queue is not written yet: the wait is for
        the queue's unfinished lines, which the writer marks done only after its write.
        It gives up once the writer has made no progress for :data:`_CLOSE_WAIT_S` (a
        sink that stopped reading), not after a fixed time: a slow sink on a loaded
        machine still gets every line.
        """
        done = self._queue.all_tasks_done
        with done:
            left = self._queue.unfinished_tasks
            stalled_at = time.monotonic() + _CLOSE_WAIT_S
            while left and self._writer.is_alive():
                done.wait(0.05)
                now_left = self._queue.unfinished_tasks
                if now_left < left:
                    left, stalled_at = now_left, time.monotonic() + _CLOSE_WAIT_S
                elif time.monotonic() >= stalled_at:
                    return

    def close(self) -> None:
        """Stop the writer once it has written what is queued (a bounded wait)."""
        self.flush()
        self._closing.set()
        self._writer.join(_CLOSE_WAIT_S)
        super().close()

    def _drop(self, count: int) -> None:
        with self._unsaid_lock:
            self._unsaid += count
        _drops.add(count)

    def _run(self) -> None:
        noted = time.monotonic()
        while not (self._closing.is_set() and self._queue.empty()):
            try:
                lines = [self._queue.get(timeout=0.2)]
            except queue.Empty:
                lines = []
            while lines and len(lines) < _BATCH_LINES:
                try:
                    lines.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if lines and not self._write(lines):
                self._drop(len(lines))
            for _ in lines:  # written or counted: what flush waits for
                self._queue.task_done()
            now = time.monotonic()
            if self._unsaid and (self._queue.empty() or now - noted >= _NOTE_EVERY_S):
                noted = now
                self._say_dropped()

    def _say_dropped(self) -> None:
        with self._unsaid_lock:
            count, self._unsaid = self._unsaid, 0
        record = logging.LogRecord(
            server_logger.name,
            logging.WARNING,
            __file__,
            0,
            "log lines were dropped: the log sink did not keep up",
            None,
            None,
        )
        fields = {
            "event": "log_lines_dropped",
            "dropped": count,
            "dropped_total": _drops.total,
            "pid": os.getpid(),  # each worker of `serve --workers N` counts its own
        }
        setattr(record, _FIELDS, fields)
        try:
            line = self.format(record)
        except Exception:
            line = strict_json.dumps(fields)
        if not self._write([line]):
            with self._unsaid_lock:  # said with the next note instead
                self._unsaid += count

    def _write(self, lines: Sequence[str]) -> bool:
        try:
            if self._fd is None:
                self.stream.write("\n".join(lines) + "\n")
                self.stream.flush()
                return True
            for chunk in _atomic_chunks(lines):
                data = memoryview(chunk)
                while data:
                    data = data[os.write(self._fd, data) :]
        except Exception:  # a closed or broken sink: the lines are lost, and counted
            return False
        return True


_PIPE_BUF = getattr(select, "PIPE_BUF", 512)
"""The most bytes one write to a pipe puts there whole, never mixed with another's."""


def _atomic_chunks(lines: Sequence[str]) -> list[bytes]:
    """``lines`` as writes of whole lines, each at most :data:`_PIPE_BUF` bytes if it can be.

    The workers of ``serve --workers N`` and their parent share one stderr: a write of at
    most ``PIPE_BUF`` bytes to a pipe is never interleaved with another process's, so no
    line is cut by another's. A single longer line is written alone (it cannot be whole).
    """
    chunks: list[bytes] = []
    pending = bytearray()
    for line in lines:
        data = (line + "\n").encode("utf-8", "backslashreplace")
        if pending and len(pending) + len(data) > _PIPE_BUF:
            chunks.append(bytes(pending))
            pending.clear()
        pending += data
    if pending:
        chunks.append(bytes(pending))
    return chunks


_flushed_on_terminate: weakref.WeakSet[QueuedStreamHandler] = weakref.WeakSet()


def _install_terminate_flush() -> None:
    """Make ``SIGTERM``'s default action write the queued lines first (see the handler)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return  # someone's handler (or ours, installed before): it decides, not us

    def flush_then_terminate(signum: int, frame: object) -> None:
        for handler in list(_flushed_on_terminate):
            handler.flush()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    signal.signal(signal.SIGTERM, flush_then_terminate)


def logging_config(
    level: LogLevel = "info", *, queue_lines: int = DEFAULT_LOG_QUEUE_LINES
) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` mapping: foureyes and uvicorn log JSON to stderr.

    Every line goes through a :class:`QueuedStreamHandler` of ``queue_lines`` lines, and
    so do other libraries' warnings (the root logger), which would otherwise reach stderr
    through ``logging.lastResort`` on the logging thread; a ``SIGTERM`` that ends the
    process writes the queued lines first. uvicorn's own access log is
    silenced: :class:`RequestLogMiddleware` writes one line per request with the route
    template instead of the raw path, which may carry text. Pass it to
    ``uvicorn.run(log_config=...)``.
    """
    name = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "stderr": {
                "()": QueuedStreamHandler,
                "formatter": "json",
                "stream": "ext://sys.stderr",
                "capacity": queue_lines,
                "flush_on_terminate": True,
            }
        },
        "root": {"handlers": ["stderr"], "level": "WARNING"},
        "loggers": {
            "foureyes": {"handlers": ["stderr"], "level": name, "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": name, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def configure_logging(
    level: LogLevel = "info", *, queue_lines: int = DEFAULT_LOG_QUEUE_LINES
) -> None:
    """Apply :func:`logging_config` to this process (a process-wide change)."""
    logging.config.dictConfig(logging_config(level, queue_lines=queue_lines))


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
