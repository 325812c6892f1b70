"""The lean transport's HTTP/1.1 client: POSTs to one origin over kept-alive connections.

The ``openai`` route kind's lean transport (``transport = "lean"``, the default) posts one
JSON body per call and reads back one JSON document or a stream of server-sent events.
aiohttp did that with its whole request machinery: request and response objects, a task
per request body, header multidicts, timers, cookie and redirect handling none of these
calls use; replacing it took 0.2–0.4 ms of the event loop's CPU off each reply of two
calls (benchmarks/README.md, "The lean transport's own HTTP client"). This client does
what the calls need and no more:

* ``POST`` with ``Content-Length`` to the origin of one URL (``http`` or ``https``, the
  system's trusted certificates, the host name checked), ``Accept-Encoding: identity``;
  each of the name's addresses tried with happy eyeballs, as aiohttp does;
* responses framed by ``Content-Length``, chunked, or by the end of the connection,
  parsed by ``httptools`` (the llhttp parser uvicorn uses); interim ``1xx`` responses
  are skipped;
* a connection is kept for the next call (for :data:`KEEP_IDLE_S` at most) when its
  response was whole and said nothing against it (HTTP/1.1, no ``Connection: close``);
  any failure, cancellation, unread rest or unsolicited byte closes it instead;
* no timeouts of its own: the caller bounds each call whole (``asyncio.timeout``);
  no retries: a request is sent once (the caller owns the retry policy, and a POST is
  not safe to repeat);
* no proxies: a route the environment sends through a proxy keeps aiohttp
  (:class:`AiohttpOrigin`), with the same interface.

Failures are :class:`TransportError` (the endpoint could not be reached, or the
connection failed before a whole response: refused, reset, TLS, a malformed or cut-off
response) and :class:`ResponseTooLarge`; :func:`foureyes.llm.openai_compat.translate_errors`
maps them into the foureyes error tree with the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "KEEP_IDLE_S",
    "MAX_BODY_BYTES",
    "AiohttpOrigin",
    "HttpOrigin",
    "Origin",
    "Reply",
    "ResponseTooLarge",
    "StreamedReply",
    "TransportError",
]

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest response body read whole (a completion, an error body)."""

_MAX_IDLE = 64
"""Idle connections kept per origin; one more is closed when it comes back."""
KEEP_IDLE_S = 15.0
"""How long an idle connection is kept for the next call (as aiohttp keeps one).

A server closes idle connections after a while of its own; one it has closed and whose
closing has not reached us yet fails the next call sent on it (a POST is not resent).
"""
_PAUSE_AT = 1024 * 1024
"""Bytes of a stream received and not yet taken at which reading pauses."""


class TransportError(Exception):
    """The endpoint could not be reached, or the connection failed before a whole response.

    Raised from the underlying error when there is one (``ConnectionRefusedError``,
    ``ssl.SSLError``, the parser's error...).
    """


class ResponseTooLarge(Exception):
    """A response body over :data:`MAX_BODY_BYTES`, read whole."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole response."""

    status: int
    headers: Mapping[str, str]
    """Header names in lower case; repeated headers joined with ``", "``."""
    body: bytes


class StreamedReply(Protocol):
    """A response whose body is read as it arrives."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (chunked framing already removed)."""
        ...

    async def read(self) -> bytes:
        """The rest of the body, whole (at most :data:`MAX_BODY_BYTES`)."""
        ...


class Origin(Protocol):
    """Where the calls of one route go: the URL's origin, one connection pool."""

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """Post ``body`` and read the whole response."""
        ...

    def stream(
        self, body: bytes, headers: Mapping[str, str]
    ) -> contextlib.AbstractAsyncContextManager[StreamedReply]:
        """Post ``body`` and read the response as it arrives, inside the block."""
        ...

    async def aclose(self) -> None:
        """Close every connection."""
        ...


_END = b""  # pushed to a stream's queue when the body is complete


class _Unsolicited(Exception):
    """A response begins after the one the exchange asked for."""


class _Connection(asyncio.Protocol):
    """One connection and the exchange on it (one request, one response at a time)."""

    def __init__(self, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        import httptools

        self._parser = httptools.HttpResponseParser(self)
        self._parser_error: type[Exception] = httptools.HttpParserError
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self._framed = False  # the response has a length or chunked framing
        self._interim = False
        self._headers_done: asyncio.Future[None] | None = None
        self._done: asyncio.Future[None] | None = None
        self._body: list[bytes] = []
        self._size = 0
        self._queue: asyncio.Queue[bytes] | None = None
        self._queued = 0
        self._paused = False
        self._ended = False
        self._limit = max_body_bytes

    # -- the exchange, as the client drives it

    def send(self, data: bytes, *, streaming: bool) -> None:
        loop = asyncio.get_running_loop()
        assert self.transport is not None
        self.reusable = False
        self.status, self.headers, self._framed, self._interim = 0, {}, False, False
        self._body, self._size, self._queued, self._ended = [], 0, 0, False
        self._headers_done, self._done = loop.create_future(), loop.create_future()
        self._queue = asyncio.Queue() if streaming else None
        self.transport.write(data)

    async def headers_received(self) -> None:
        assert self._headers_done is not None
        await self._headers_done

    async def whole_body(self) -> bytes:
        assert self._done is not None
        await self._done
        return b"".join(self._body)

    async def next_chunk(self) -> bytes:
        """The next piece of a streamed body; ``b""`` once it is complete.

        Raises:
            TransportError: the connection failed before the body was whole.
        """
        assert self._queue is not None and self._done is not None
        if not self._ended:
            chunk = await self._queue.get()
            if chunk:
                self._queued -= len(chunk)
                if self._paused and self._queued < _PAUSE_AT // 2 and self.transport is not None:
                    self._paused = False
                    self.transport.resume_reading()
                return chunk
            self._ended = True
        self._done.result()  # the stream's failure, if it failed
        return _END

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def complete(self) -> bool:
        return self._done is not None and self._done.done() and not self._done.exception()

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is one without subclassing asyncio's).
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._done is None or self._done.done():
            return
        headers_done = self._headers_done is not None and self._headers_done.done()
        if exc is None and headers_done and not self._framed:
            self._finish()  # a body framed by the end of the connection
            return
        failure = TransportError("the connection closed before the whole response")
        if exc is not None:
            failure.__cause__ = exc
        self._fail(failure)

    def data_received(self, data: bytes) -> None:
        if self._done is None or self._done.done():
            self.close()  # bytes nobody asked for: the connection is not trustworthy
            return
        try:
            self._parser.feed_data(data)
        except self._parser_error as exc:
            if isinstance(exc.__context__, _Unsolicited):
                self.close()  # a response after the one asked for, in the same bytes
                return
            failure = TransportError(f"a malformed response ({type(exc).__name__})")
            failure.__cause__ = exc
            self._fail(failure)
            self.close()

    # -- httptools' callbacks

    def on_message_begin(self) -> None:
        if self._done is None or self._done.done():
            raise _Unsolicited  # stops the parser: nothing after the response is read

    def on_header(self, name: bytes, value: bytes) -> None:
        _add_header(self.headers, name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._interim = True  # a 1xx: its headers are forgotten, the response follows
            self.headers = {}
            return
        self.status = status
        transfer = self.headers.get("transfer-encoding", "").lower()
        self._framed = (
            "content-length" in self.headers or "chunked" in transfer or status in (204, 304)
        )
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._queue is not None:
            self._queued += len(body)
            self._queue.put_nowait(body)
            if not self._paused and self._queued >= _PAUSE_AT and self.transport is not None:
                self._paused = True
                self.transport.pause_reading()
            return
        if self._size > self._limit:
            self._fail(ResponseTooLarge(f"a response body over {self._limit} bytes"))
            self.close()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        version = self._parser.get_http_version()
        self.reusable = (
            version == "1.1" and "close" not in self.headers.get("connection", "").lower()
        )
        self._finish()

    # -- ends of an exchange

    def _finish(self) -> None:
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_result(None)
        if self._done is not None and not self._done.done():
            self._done.set_result(None)
        if self._queue is not None:
            self._queue.put_nowait(_END)

    def _fail(self, exc: BaseException) -> None:
        self.reusable = False
        for future in (self._headers_done, self._done):
            if future is not None and not future.done():
                future.set_exception(exc)
                # Retrieved by whoever awaits; marked so an unawaited one logs nothing.
                future.exception()
        if self._queue is not None:
            self._queue.put_nowait(_END)


@dataclass(slots=True)
class _Streamed:
    """A :class:`StreamedReply` on one connection."""

    _connection: _Connection
    status: int
    headers: Mapping[str, str]

    async def chunks(self) -> AsyncIterator[bytes]:
        while chunk := await self._connection.next_chunk():
            yield chunk

    async def read(self) -> bytes:
        parts, size, limit = [], 0, self._connection.limit
        async for chunk in self.chunks():
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"a response body over {limit} bytes")
            parts.append(chunk)
        return b"".join(parts)


class HttpOrigin:
    """:class:`Origin` over this module's own connections."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        keep_idle_s: float = KEEP_IDLE_S,
    ) -> None:
        """Post to ``url`` (its path and query are the request's target).

        ``ssl_context`` (``https``): the certificates trusted, the system's by default.
        ``max_body_bytes``: the largest body read whole (:class:`ResponseTooLarge`).
        ``keep_idle_s``: how long an idle connection is kept for reuse.

        Raises:
            ValueError: ``url`` is not an ``http`` or ``https`` URL with a host.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL with a host: {url!r}")
        secure = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if secure else 80)
        self._ssl = (ssl_context or ssl.create_default_context()) if secure else None
        name = f"[{self._host}]" if ":" in self._host else self._host
        host = name if parts.port is None else f"{name}:{self._port}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._head = f"POST {target} HTTP/1.1\r\nHost: {host}\r\n".encode("latin-1")
        self._max_body_bytes = max_body_bytes
        self._keep_idle_s = keep_idle_s
        self._idle: list[tuple[_Connection, float]] = []  # each with when it went idle
        self._closed = False

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        connection = await self._exchange(body, headers, streaming=False)
        try:
            content = await connection.whole_body()
        except BaseException:
            connection.close()
            raise
        self._release(connection)
        return Reply(connection.status, connection.headers, content)

    @contextlib.asynccontextmanager
    async def stream(self, body: bytes, headers: Mapping[str, str]) -> AsyncIterator[_Streamed]:
        connection = await self._exchange(body, headers, streaming=True)
        try:
            yield _Streamed(connection, connection.status, connection.headers)
        except BaseException:
            connection.close()
            raise
        if connection.complete:
            self._release(connection)
        else:
            connection.close()  # the rest of the body was not read

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()

    async def _exchange(
        self, body: bytes, headers: Mapping[str, str], *, streaming: bool
    ) -> _Connection:
        """A connection whose response's status and headers have arrived."""
        connection = await self._connection()
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        head = self._head + (
            f"{lines}Accept-Encoding: identity\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1")
        try:
            connection.send(head + body, streaming=streaming)
            await connection.headers_received()
        except BaseException:
            connection.close()
            raise
        encoding = connection.headers.get("content-encoding", "identity").lower()
        if encoding != "identity":
            connection.close()
            raise TransportError(f"a body encoded as {encoding!r}, which was not asked for")
        return connection

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        kept_since = loop.time() - self._keep_idle_s
        while self._idle:
            connection, since = self._idle.pop()
            if not connection.closed and since > kept_since:
                return connection
            connection.close()
        import aiohappyeyeballs

        try:
            # Every address of the name, IPv6 and IPv4 interleaved, the next one tried
            # 0.25 s after the last if it has not connected yet (RFC 8305, as aiohttp
            # does): a host whose first address is unreachable is still reached. On any
            # event loop (uvloop's create_connection has no happy-eyeballs option).
            addresses = await loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
            sock = await aiohappyeyeballs.start_connection(
                addresses, happy_eyeballs_delay=0.25, interleave=1
            )
            _, connection = await loop.create_connection(
                lambda: _Connection(self._max_body_bytes),
                sock=sock,
                ssl=self._ssl,
                server_hostname=self._host if self._ssl is not None else None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise TransportError(f"could not connect ({type(exc).__name__})") from exc
        return connection

    def _release(self, connection: _Connection) -> None:
        if self._closed or not connection.reusable or connection.closed:
            connection.close()
        elif len(self._idle) >= _MAX_IDLE:
            connection.close()
        else:
            self._idle.append((connection, asyncio.get_running_loop().time()))


@dataclass(slots=True)
class _AiohttpStreamed:
    _response: aiohttp.ClientResponse
    status: int
    headers: Mapping[str, str]

    async def chunks(self) -> AsyncIterator[bytes]:
        async for data in self._response.content.iter_any():
            yield data

    async def read(self) -> bytes:
        return await self._response.read()


class AiohttpOrigin:
    """:class:`Origin` through an aiohttp session, for a route behind the environment's proxy."""

    def __init__(self, url: str, proxy: str) -> None:
        import aiohttp

        self._url = url
        self._proxy = proxy
        # No cookies between calls; no timeouts of aiohttp's own (each call is bounded
        # whole by its caller), and the proxy given here rather than aiohttp's trust_env,
        # which would look the environment (and ~/.netrc) up in a thread on every request.
        self._session = aiohttp.ClientSession(
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=None),
        )

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        async with self._session.post(
            self._url, data=body, headers=dict(headers), proxy=self._proxy
        ) as response:
            content = await response.read()
            return Reply(response.status, _lower(response.headers), content)

    @contextlib.asynccontextmanager
    async def stream(
        self, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[_AiohttpStreamed]:
        async with self._session.post(
            self._url, data=body, headers=dict(headers), proxy=self._proxy
        ) as response:
            yield _AiohttpStreamed(response, response.status, _lower(response.headers))

    async def aclose(self) -> None:
        await self._session.close()


def _lower(headers: Any) -> dict[str, str]:
    joined: dict[str, str] = {}
    for name, value in headers.items():
        _add_header(joined, name, value)
    return joined


def _add_header(headers: dict[str, str], name: str, value: str) -> None:
    """Add header ``name`` to ``headers`` as :class:`Reply` keeps them (lower case, joined)."""
    key = name.lower()
    headers[key] = f"{headers[key]}, {value}" if key in headers else value
