"""Request limits: per-key rate limits, request body size and encoding, CORS.

- :class:`RateLimiter` keeps one token bucket per key in this process: several processes
  each enforce the configured rate on their own, so a key may get up to N times
  ``server.rate_per_minute`` from N of them. :class:`StoreRateLimiter` keeps the buckets
  in the store, shared by every process on the database: each process leases up to
  ``server.rate_lease_tokens`` tokens from a key's bucket in one statement and spends them
  itself (a :class:`TokenLease`), so the key's row is written once per lease, not once per
  request; a store that cannot answer refuses the request (``StoreError``, answered 503),
  never admits it unlimited. Both are a :class:`KeyLimiter`; :func:`key_limiter` picks the
  one ``server.rate_limit_backend`` names.
- :class:`BodyGuardMiddleware` answers 413 when the declared ``Content-Length`` is over
  ``server.max_body_bytes`` without reading the body at all, counts the bytes of bodies
  streamed without one and stops at the limit, refuses JSON bodies that are not UTF-8,
  and answers 408 (closing the connection) when the body has not all arrived within
  ``server.body_timeout_s``. The connection cap is uvicorn's (``server.max_connections``,
  set by ``foureyes serve``).
- :func:`read_json` reads a JSON body for handlers that take it whole rather than as a
  pydantic parameter, with the same 400 ``invalid_json`` FastAPI's parameters give.
- :func:`add_cors` turns CORS on only for the origins configured; it is off by default.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.message import Message as _MediaType
from typing import Any, Protocol

from fastapi import FastAPI, Request
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foureyes.config import ServerConfig
from foureyes.core.errors import StoreError, UsageError
from foureyes.server._logging import log_event, server_logger
from foureyes.server._memo import remember_short
from foureyes.server.errors import ApiError, ErrorCode, error_response, locale_from_accept_language
from foureyes.store.rate_limits import BucketLease, SqlRateBuckets

__all__ = [
    "BodyGuardMiddleware",
    "KeyLimiter",
    "RateDecision",
    "RateLimiter",
    "StoreRateLimiter",
    "TokenLease",
    "add_cors",
    "key_limiter",
    "read_json",
]

_MAX_BUCKETS = 100_000


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether one request may go ahead under its key's rate limit."""

    allowed: bool
    """Whether the request may go ahead (a token was taken)."""
    retry_after_s: float
    """Seconds until a token is available again; 0 when allowed."""
    remaining: int
    """Whole tokens left after this request."""

    @property
    def retry_after_header(self) -> str:
        """``retry_after_s`` rounded up to whole seconds (at least 1), for ``Retry-After``."""
        return str(max(1, math.ceil(self.retry_after_s)))


class KeyLimiter(Protocol):
    """A per-key rate limit the request path asks once per authenticated request."""

    async def admit(self, key: str) -> RateDecision:
        """Take one token from ``key``'s bucket if there is one.

        Raises:
            StoreError: the limit could not be checked; the request must be refused.
        """
        ...

    async def aclose(self) -> None:
        """Wait for the limiter's background work (before its store closes)."""
        ...


def _check_rate(rate_per_minute: float, burst: int) -> None:
    if not (math.isfinite(rate_per_minute) and rate_per_minute > 0) or burst < 1:
        raise UsageError("rate_per_minute must be positive and finite, burst at least 1")


class RateLimiter:
    """Token buckets per key in this process: ``burst`` at once, then ``rate_per_minute``.

    A bucket starts full; each request takes one token; tokens come back continuously at
    the rate until the bucket is full again. Pure and synchronous: the time comes from
    ``clock`` (monotonic seconds), so tests control it.
    """

    def __init__(
        self,
        *,
        rate_per_minute: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Allow ``burst`` requests at once per key, refilled at ``rate_per_minute``.

        Raises:
            UsageError: the rate is not positive and finite, or ``burst`` is below 1.
        """
        _check_rate(rate_per_minute, burst)
        self._rate_per_s = rate_per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    @classmethod
    def from_config(cls, server: ServerConfig) -> RateLimiter:
        """The limiter ``server.rate_per_minute`` and ``server.burst`` describe."""
        return cls(rate_per_minute=server.rate_per_minute, burst=server.burst)

    def take(self, key: str) -> RateDecision:
        """Take one token from ``key``'s bucket if there is one."""
        now = self._clock()
        tokens = self._level(key, now)
        if tokens >= 1.0:
            tokens -= 1.0
            self._store(key, tokens, now)
            return RateDecision(allowed=True, retry_after_s=0.0, remaining=int(tokens))
        self._store(key, tokens, now)
        return RateDecision(
            allowed=False, retry_after_s=(1.0 - tokens) / self._rate_per_s, remaining=0
        )

    async def admit(self, key: str) -> RateDecision:
        """:meth:`take`, as a :class:`KeyLimiter`."""
        return self.take(key)

    async def aclose(self) -> None:
        """Nothing runs in the background of the in-memory limiter."""

    def _level(self, key: str, now: float) -> float:
        held = self._buckets.get(key)
        if held is None:
            return self._burst
        tokens, at = held
        return min(self._burst, tokens + max(0.0, now - at) * self._rate_per_s)

    def _store(self, key: str, tokens: float, now: float) -> None:
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > _MAX_BUCKETS:
            # A full bucket is the same as no bucket, so dropping those loses nothing.
            self._buckets = {
                k: v for k, v in self._buckets.items() if self._level(k, now) < self._burst
            }


class TokenLease:
    """Tokens one process leased from a key's bucket in the store, spent here one by one.

    Pure and synchronous: the times are the store clock's seconds, passed in. A lease of
    ``size`` tokens taken at ``at`` left ``tokens`` in the store's bucket, so ``headroom =
    burst - size - tokens`` more tokens had to come back before the bucket, refilled as if
    nobody took anything since, would hold more than ``burst - size``. From then on the
    store refills into the room the lease's tokens left, so the lease fades at the refill
    rate: it may spend a token at ``now`` while ``spent + 1 <= size - decay(now)``, where
    ``decay(now) = max(0, rate * (now - at) - headroom)``. That keeps the limit exact
    across processes:

    *Never over.* For any span ``[a, b]``, the requests admitted in it by every process
    together are at most ``burst + rate * (b - a)``. Proof: those spent from leases taken
    in the span are at most the tokens the store gave out in it, at most ``L(a) + rate *
    (b - a)`` (``L`` the store bucket's level); those spent from leases held at ``a`` are at
    most each lease's ``usable(a) = size - spent - decay(a)`` (the spend rule, ``decay``
    never decreasing). Let ``e`` be the earliest lease with ``usable(a) > 0``: since it,
    the store only refilled (at most ``rate`` a second) and gave out the later leases, so
    ``L(a) <= tokens_e - sum(size_i of later leases) + rate * (a - at_e)``, and the sum of
    ``usable(a)`` is at most ``sum(size_i of later leases) + size_e - decay_e(a)``. Both
    together: ``L(a) + sum usable(a) <= tokens_e + size_e + rate * (a - at_e) - decay_e(a)
    <= burst`` (whether or not ``decay_e`` has started, by the headroom's definition).
    The property test in tests/server/test_rate_leases.py checks it over interleavings.

    *Under by at most one lease per process.* Tokens are lost only when leased and not
    spent: a process holds one lease per key, of at most ``size`` tokens; a lease is given
    up only once it has no whole token left, and what fades of it is only what the refill
    puts back into the store meanwhile. So while the rate is negligible (or within a
    lease's headroom) P processes admit at least ``burst - P * size`` of a bucket's
    ``burst`` together. A lease taken from a full bucket has no headroom: it fades from
    its first moment, so its last token is spent only by the requests waiting for the
    lease (they are admitted as of its time) and is otherwise left to the store, whose
    bucket regains it as the refill goes on.

    A lease of 0 tokens is a refusal: the store held less than one token (``tokens``) at
    ``at``, so nobody can take one before ``at + (1 - tokens) / rate``; until then this
    process refuses the key without asking the store again.
    """

    __slots__ = ("at", "headroom", "size", "spent", "tokens")

    def __init__(self, lease: BucketLease, *, burst: int) -> None:
        """The lease the store statement returned (``lease.taken`` tokens at ``lease.at``)."""
        self.size = lease.taken
        """Tokens leased."""
        self.tokens = lease.tokens
        """Tokens the store's bucket held after the lease."""
        self.at = lease.at
        """When the lease was taken (store clock seconds)."""
        self.headroom = max(0.0, burst - lease.taken - lease.tokens)
        """Refill the store's bucket takes before it refills over this lease."""
        self.spent = 0
        """Tokens spent (requests admitted) from the lease."""

    def usable(self, now: float, rate_per_s: float) -> float:
        """Tokens the lease may still spend at ``now`` (whole ones count)."""
        decay = max(0.0, rate_per_s * max(0.0, now - self.at) - self.headroom)
        return self.size - self.spent - decay

    def live(self, now: float, rate_per_s: float) -> bool:
        """Whether the lease still decides at ``now`` (a whole token left, or a refusal)."""
        if self.size == 0:
            return self.at + (1.0 - self.tokens) / rate_per_s > now
        return self.usable(now, rate_per_s) >= 1.0

    def decide(self, now: float, rate_per_s: float) -> RateDecision | None:
        """Spend a token at ``now``, or refuse; ``None`` when the store must be asked again."""
        if self.size == 0:
            wait = self.at + (1.0 - self.tokens) / rate_per_s - now
            if wait > 0:
                return RateDecision(allowed=False, retry_after_s=wait, remaining=0)
            return None
        left = self.usable(now, rate_per_s) - 1.0
        if left < 0:
            return None
        self.spent += 1
        return RateDecision(allowed=True, retry_after_s=0.0, remaining=int(left) + int(self.tokens))


class StoreRateLimiter:
    """Token buckets per key in the store, shared by every process on the database.

    The same buckets as :class:`RateLimiter` (``burst`` at once, refilled continuously at
    ``rate_per_minute``); the time is the store's clock. A process leases up to
    ``lease_tokens`` tokens of a key's bucket in one atomic statement on the key's row
    (:meth:`~foureyes.store.rate_limits.SqlRateBuckets.lease`) and admits requests from
    the lease until it is spent (:class:`TokenLease`: never more than the bucket allows
    across processes, fewer by at most one lease per process). Requests for a key whose
    lease is spent wait for one statement together. ``lease_tokens = 1`` is one statement
    per request, as exact as a single bucket.
    """

    def __init__(
        self,
        buckets: SqlRateBuckets,
        *,
        rate_per_minute: float,
        burst: int,
        lease_tokens: int = 1,
        sweep_every: int = 1024,
    ) -> None:
        """Allow ``burst`` requests at once per key, refilled at ``rate_per_minute``.

        Every ``sweep_every`` requests this process has admitted, the buckets that have
        refilled to the burst are deleted in the background (:meth:`sweep`), as the
        in-memory limiter drops its full buckets, so the table holds only recent keys.

        Raises:
            UsageError: the rate is not positive and finite, ``burst`` is below 1,
                ``lease_tokens`` is below 1 or above ``burst``, or ``sweep_every`` is
                below 1.
        """
        _check_rate(rate_per_minute, burst)
        if sweep_every < 1:
            raise UsageError("sweep_every must be at least 1")
        if not 1 <= lease_tokens <= burst:
            raise UsageError("lease_tokens must be at least 1 and at most the burst")
        self._buckets = buckets
        self._rate_per_s = rate_per_minute / 60.0
        self._burst = burst
        self._lease_tokens = lease_tokens
        self._sweep_every = sweep_every
        self._admitted = 0
        self._leases: dict[str, TokenLease] = {}
        self._renewing: dict[str, asyncio.Task[TokenLease]] = {}
        self.sweeping: asyncio.Task[int] | None = None
        """The background sweep in progress, if any (tests and shutdown await it)."""

    @property
    def lease_tokens(self) -> int:
        """Tokens leased from the store at once."""
        return self._lease_tokens

    async def aclose(self) -> None:
        """Wait for a background sweep and lease statements still running."""
        running = [*self._renewing.values(), *([self.sweeping] if self.sweeping else [])]
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    async def sweep(self) -> int:
        """Delete the full buckets now; how many.

        Raises:
            StoreError: the store could not be written.
        """
        return await self._buckets.forget_full(rate_per_s=self._rate_per_s, burst=self._burst)

    def _maybe_sweep(self) -> None:
        self._admitted += 1
        if self._admitted % self._sweep_every or self.sweeping is not None:
            return
        self.sweeping = asyncio.get_running_loop().create_task(self._sweep_in_background())

    async def _sweep_in_background(self) -> int:
        try:
            return await self.sweep()
        except StoreError as exc:  # only housekeeping: the next sweep tries again
            log_event(
                server_logger,
                "rate_bucket_sweep_failed",
                level="warning",
                message="deleting full rate-limit buckets failed; the next sweep retries",
                exc_info=exc,
            )
            return 0
        finally:
            self.sweeping = None

    async def admit(self, key: str) -> RateDecision:
        """Take one token of ``key``'s bucket: from this process's lease, else a new lease.

        Raises:
            StoreError: the store could not be written; the request must be refused.
        """
        held = self._leases.get(key)
        now = self._buckets.now() if held is not None else 0.0
        while True:
            decision = None if held is None else held.decide(now, self._rate_per_s)
            if decision is not None:
                if decision.allowed:
                    self._maybe_sweep()
                return decision
            renewing = self._renewing.get(key)
            if renewing is None:
                renewing = asyncio.get_running_loop().create_task(self._renew(key))
                renewing.add_done_callback(_retrieve)
                self._renewing[key] = renewing
            # Shielded: a caller that goes away does not cancel the others' statement.
            held = await asyncio.shield(renewing)
            # Spent as of the lease's time, as a single take is as of its statement's.
            now = held.at

    async def _renew(self, key: str) -> TokenLease:
        try:
            taken = await self._buckets.lease(
                key, want=self._lease_tokens, rate_per_s=self._rate_per_s, burst=self._burst
            )
            lease = TokenLease(taken, burst=self._burst)
            self._leases[key] = lease
            if len(self._leases) > _MAX_BUCKETS:
                # Dropping a lease only gives up its tokens (never admits more); the ones
                # with nothing left lose nothing at all.
                self._leases = {
                    k: v for k, v in self._leases.items() if v.live(lease.at, self._rate_per_s)
                }
            return lease
        finally:
            del self._renewing[key]


def _retrieve(task: asyncio.Task[TokenLease]) -> None:
    # Every waiter sees the failure; this only keeps asyncio from reporting it unread.
    if not task.cancelled():
        task.exception()


def key_limiter(server: ServerConfig, buckets: SqlRateBuckets) -> KeyLimiter:
    """The limiter ``server.rate_limit_backend`` (resolved with ``server.workers``) names."""
    if server.shared_rate_limits:
        return StoreRateLimiter(
            buckets,
            rate_per_minute=server.rate_per_minute,
            burst=server.burst,
            lease_tokens=server.lease_tokens,
        )
    return RateLimiter.from_config(server)


def _declares_json(content_type: str | None) -> bool:
    # A body without a content type can only be read as JSON (``request.json()`` reads any
    # body), so it is checked as JSON too.
    if content_type is None:
        return True
    return _media_is_json(content_type)


@remember_short(longest=128, size=256)  # parsed on every request
def _media_is_json(content_type: str) -> bool:
    media = _MediaType()
    media["content-type"] = content_type
    subtype = media.get_content_subtype()
    return media.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class BodyGuardMiddleware:
    """Refuses bodies over ``max_bytes`` (413), JSON not in UTF-8 (400), slow bodies (408).

    A declared ``Content-Length`` over the limit is answered at once, before the app or
    any authentication runs and before a byte of the body is read. Otherwise the bytes
    are counted as the app reads them, and reading stops with :class:`ApiError` as soon
    as the count passes the limit. JSON must be UTF-8 (RFC 8259), so a JSON body with an
    invalid sequence or a NUL byte (which also rules out UTF-16 and UTF-32) is refused
    as it is read. The whole body must arrive within ``timeout_s`` of the request's start
    (uvicorn has no such timeout): a read still waiting then ends with 408
    ``request_timeout`` and ``Connection: close``, so the stalled connection is dropped.
    Once the body is complete, reads (a handler waiting for the client to disconnect)
    have no deadline.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout_s: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            locale = locale_from_accept_language(headers.get("accept-language"))
            response = error_response(ErrorCode.REQUEST_TOO_LARGE, locale, limit=self.max_bytes)
            await response(scope, receive, send)
            return
        decoder = (
            codecs.getincrementaldecoder("utf-8")()
            if _declares_json(headers.get("content-type"))
            else None
        )
        received = 0
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        complete = False

        async def guarded_receive() -> Message:
            nonlocal received, complete
            if complete:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise ApiError(
                    ErrorCode.REQUEST_TIMEOUT,
                    headers={"connection": "close"},
                    timeout_s=f"{self.timeout_s:g}",
                ) from None
            if message["type"] != "http.request":
                return message
            complete = not message.get("more_body", False)
            chunk: bytes = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                raise ApiError(ErrorCode.REQUEST_TOO_LARGE, limit=self.max_bytes)
            if decoder is not None:
                if b"\x00" in chunk:
                    raise ApiError(ErrorCode.INVALID_ENCODING)
                try:
                    decoder.decode(chunk, final=not message.get("more_body", False))
                except UnicodeDecodeError:
                    raise ApiError(ErrorCode.INVALID_ENCODING) from None
            return message

        await self.app(scope, guarded_receive, send)


async def read_json(request: Request) -> Any:
    """The request's body parsed as JSON, of any shape (the handler validates it).

    Size and encoding are :class:`BodyGuardMiddleware`'s: it refuses the body while it
    is read, so what reaches the parser is UTF-8 without NUL bytes.

    Raises:
        ApiError: 400 ``invalid_json`` when the body is not JSON (from the middleware:
            413 ``request_too_large``, 400 ``invalid_encoding``).
    """
    body = await request.body()
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        detail = f"{exc.msg} (at position {exc.pos})"
        raise ApiError(ErrorCode.INVALID_JSON, detail=detail) from None


def add_cors(app: FastAPI, origins: Sequence[str]) -> None:
    """Let browsers on ``origins`` call ``app``; with no origins, add nothing (CORS off).

    Keys travel in the ``Authorization`` header, never in cookies, so credentials mode
    stays off and ``*`` is a valid choice.
    """
    if not origins:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=["authorization", "content-type", "accept-language", "x-request-id"],
        expose_headers=["retry-after", "x-request-id"],
        allow_credentials=False,
        max_age=600,
    )
