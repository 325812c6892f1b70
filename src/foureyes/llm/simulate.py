"""``foureyes simulate``: a real OpenAI-compatible server that answers from a scenario.

It serves ``POST /v1/chat/completions`` (plain and ``stream: true`` server-sent events)
and ``GET /v1/models`` over real HTTP, so tests and users drive the production path of
any OpenAI client, and it injects the faults a fail-closed deployment must survive:
delays, hangs, HTTP 401/429/500, bodies that are not JSON, truncation and wrong digests.

Control endpoints under ``/_sim/`` let one long-running process serve many tests:

- ``PUT /_sim/scenario``: replace the scenario (JSON body); also resets as below;
- ``GET /_sim/scenario``: the scenario in effect (API key masked);
- ``GET /_sim/requests``: every chat request received since the last reset;
- ``POST /_sim/reset``: forget rule uses and the in-memory request log.

The control endpoints take no key: the simulator is a test double and listens on
loopback unless told otherwise. docs/simulate.md documents the scenario format.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import socket
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import IO, Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from foureyes.core.errors import ConfigError
from foureyes.llm._scenario import (
    MALFORMED_BODY,
    Fault,
    Reply,
    Rule,
    RuleBook,
    Scenario,
    UnresolvedPlaceholder,
    load_scenario,
    parse_scenario,
    render_reply,
    wire_chunks,
    wire_completion,
)

__all__ = [
    "Fault",
    "Scenario",
    "Simulator",
    "listen",
    "load_scenario",
    "parse_scenario",
    "serve",
    "serving",
]

_BACKLOG = 2048
"""Pending connections the kernel queues; benchmarks open many at once."""


def _error(
    status: int,
    message: str,
    *,
    kind: str,
    code: str | None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code, **extra}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def _bad_key() -> JSONResponse:
    # Like OpenAI's, but without echoing any part of the key that was sent.
    return _error(
        401, "Incorrect API key provided.", kind="invalid_request_error", code="invalid_api_key"
    )


async def _until_disconnect(request: Request) -> None:
    # Once the body is read, the next ASGI message can only be the client going away.
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _sse(
    payloads: Iterator[dict[str, Any] | str], interval_s: float = 0.0
) -> AsyncIterator[bytes]:
    for n, data in enumerate(payloads):
        if n and interval_s:
            await asyncio.sleep(interval_s)
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        yield f"data: {text}\n\n".encode()


@dataclass(frozen=True, slots=True)
class _Arrival:
    """What a chat request is numbered with when it arrives."""

    seq: int
    """Its place in arrival order (1 for the first since the process started)."""
    in_flight: int
    """Chat requests arrived and not yet answered (held or being decided), itself included."""


class Simulator:
    """The simulator's state (scenario, rule uses, request log) and its ASGI app.

    Every chat request is logged as one JSON object: ``seq``, ``in_flight`` (chat requests
    arrived and not yet answered when this one arrived, itself included), ``time`` (UTC ISO 8601),
    ``model``, ``stream``, ``messages``, ``options`` (every other request field), ``rule``
    (index in the model's rule list, or ``None``), ``rule_name``, ``fault``, ``status``
    (``None`` for a hang) and ``error`` (the OpenAI error code the simulator answered
    with, or ``None``). The bearer key is never logged.
    """

    def __init__(self, scenario: Scenario, *, log_path: Path | None = None) -> None:
        """Serve ``scenario``; append each request's log line to ``log_path`` when given.

        Raises:
            ConfigError: the log file cannot be opened for appending.
        """
        self._book = RuleBook(scenario)
        self._requests: list[dict[str, Any]] = []
        self._seq = 0
        self._in_flight = 0
        self._stopping = asyncio.Event()
        self._log: IO[str] | None = None
        if log_path is not None:
            try:
                self._log = open(log_path, "a", encoding="utf-8", buffering=1)
            except OSError as exc:
                problem = f"cannot open log file {str(log_path)!r}: {exc.strerror or exc}"
                raise ConfigError([problem]) from None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/_sim/scenario", self._get_scenario, methods=["GET"]),
                Route("/_sim/scenario", self._put_scenario, methods=["PUT"]),
                Route("/_sim/requests", self._get_requests, methods=["GET"]),
                Route("/_sim/reset", self._post_reset, methods=["POST"]),
            ]
        )
        """The ASGI application."""

    @property
    def scenario(self) -> Scenario:
        """The scenario in effect."""
        return self._book.scenario

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the request log since the last reset."""
        return list(self._requests)

    def load(self, scenario: Scenario) -> None:
        """Replace the scenario, forgetting rule uses and the in-memory log."""
        self._book = RuleBook(scenario)
        self._requests.clear()

    def reset(self) -> None:
        """Forget rule uses and the in-memory log (the log file keeps every line)."""
        self._book.reset()
        self._requests.clear()

    def stop(self) -> None:
        """Release held requests (``hang``, ``delay``) with HTTP 503: the server is stopping."""
        self._stopping.set()

    async def _hold(self, request: Request, seconds: float | None) -> Response | None:
        """Keep the request open for ``seconds`` (``None``: until the client or server goes).

        Returns ``None`` when the time is up, else the response that ends the request early.
        """
        left = asyncio.ensure_future(_until_disconnect(request))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait(
                {left, stopping}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            left.cancel()
            stopping.cancel()
            await asyncio.gather(left, stopping, return_exceptions=True)
        if left in done:
            return Response(status_code=204)  # the client left; nobody reads this
        if stopping in done:
            return _error(
                503,
                "The simulator is shutting down.",
                kind="server_error",
                code="simulator_stopping",
            )
        return None

    def close(self) -> None:
        """Close the log file."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def _record(
        self,
        arrival: _Arrival,
        body: Mapping[str, Any],
        *,
        status: int | None,
        error: str | None = None,
        picked: tuple[int, Rule] | None = None,
    ) -> None:
        index, rule = picked if picked is not None else (None, None)
        entry = {
            "seq": arrival.seq,
            "in_flight": arrival.in_flight,
            "time": datetime.now(UTC).isoformat(),
            "model": body.get("model"),
            "stream": body.get("stream") is True,
            "messages": body.get("messages"),
            "options": {k: v for k, v in body.items() if k not in ("model", "messages")},
            "rule": index,
            "rule_name": rule.name if rule else None,
            "fault": rule.fault.value if rule and rule.fault else None,
            "status": status,
            "error": error,
        }
        self._requests.append(entry)
        if self._log is not None:
            self._log.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def _authorized(self, request: Request) -> bool:
        key = self.scenario.api_key
        if key is None:
            return True
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), key.get_secret_value().encode())

    async def _chat(self, request: Request) -> Response:
        self._seq += 1
        self._in_flight += 1
        # requests interleave at every await; each keeps the numbers it arrived with
        arrival = _Arrival(self._seq, self._in_flight)
        try:
            return await self._chat_arrived(request, arrival)
        finally:
            self._in_flight -= 1

    async def _chat_arrived(self, request: Request, arrival: _Arrival) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        messages = body.get("messages") if isinstance(body, dict) else None
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("model"), str)
            or not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) for m in messages)
        ):
            self._record(
                arrival, body if isinstance(body, dict) else {}, status=400, error="invalid_body"
            )
            return _error(
                400,
                "the body must be a JSON object with a string 'model' and a non-empty "
                "'messages' list of objects",
                kind="invalid_request_error",
                code="invalid_body",
            )
        model: str = body["model"]
        if not self._authorized(request):
            self._record(arrival, body, status=401, error="invalid_api_key")
            return _bad_key()
        if not self._book.knows(model):
            self._record(arrival, body, status=404, error="model_not_found")
            return _error(
                404,
                f"The model {model!r} does not exist in this simulator scenario.",
                kind="invalid_request_error",
                code="model_not_found",
            )
        picked = self._book.pick(model, messages)
        if picked is None:
            self._record(arrival, body, status=400, error="no_matching_rule")
            return _error(
                400,
                f"No rule of model {model!r} matches this request (or every match is used up).",
                kind="invalid_request_error",
                code="no_matching_rule",
            )
        try:
            reply = render_reply(picked[1], model=model, messages=messages, seq=arrival.seq)
        except UnresolvedPlaceholder as exc:
            self._record(arrival, body, picked=picked, status=400, error="unresolved_placeholder")
            code = "unresolved_placeholder"
            return _error(400, str(exc), kind="invalid_request_error", code=code)
        return await self._answer(request, arrival, body, picked, reply)

    async def _answer(
        self,
        request: Request,
        arrival: _Arrival,
        body: Mapping[str, Any],
        picked: tuple[int, Rule],
        reply: Reply,
    ) -> Response:
        seq = arrival.seq
        rule = picked[1]
        fault = rule.fault
        if fault is Fault.HANG:
            self._record(arrival, body, picked=picked, status=None)
            held = await self._hold(request, None)
            assert held is not None  # with no time limit only a departure ends the hold
            return held
        if fault is Fault.HTTP_401:
            self._record(arrival, body, picked=picked, status=401, error="invalid_api_key")
            return _bad_key()
        if fault is Fault.HTTP_429:
            retry_after = rule.retry_after_s if rule.retry_after_s is not None else 1.0
            self._record(arrival, body, picked=picked, status=429, error="rate_limit_exceeded")
            return _error(
                429,
                "Rate limit reached; please retry later.",
                kind="requests",
                code="rate_limit_exceeded",
                headers={
                    "retry-after": str(math.ceil(retry_after)),
                    "retry-after-ms": str(round(retry_after * 1000)),
                },
            )
        if fault is Fault.HTTP_500:
            self._record(arrival, body, picked=picked, status=500, error="server_error")
            return _error(
                500,
                "The server had an error while processing your request.",
                kind="server_error",
                code="server_error",
            )
        self._record(arrival, body, picked=picked, status=200)
        if rule.delay_s is not None and (held := await self._hold(request, rule.delay_s)):
            return held
        model: str = body["model"]
        created = int(time.time())
        if body.get("stream") is True:
            options = body.get("stream_options")
            usage = isinstance(options, dict) and options.get("include_usage") is True
            payloads = wire_chunks(
                reply, model=model, seq=seq, created=created, fault=fault, include_usage=usage
            )
            return StreamingResponse(
                _sse(payloads, rule.stream_interval_s), media_type="text/event-stream"
            )
        if fault is Fault.MALFORMED_JSON:
            return Response(MALFORMED_BODY, media_type="application/json")
        return JSONResponse(wire_completion(reply, model=model, seq=seq, created=created))

    async def _models(self, request: Request) -> Response:
        if not self._authorized(request):
            return _bad_key()
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "foureyes-simulate"}
            for name in sorted(self.scenario.models)
        ]
        return JSONResponse({"object": "list", "data": data})

    async def _get_scenario(self, request: Request) -> Response:
        return JSONResponse(self.scenario.model_dump(mode="json"))

    async def _put_scenario(self, request: Request) -> Response:
        try:
            data = await request.json()
        except ValueError:
            return _error(400, "the scenario must be JSON", kind="invalid_scenario", code=None)
        try:
            scenario = parse_scenario(data)
        except ConfigError as exc:
            return _error(
                422,
                "invalid scenario",
                kind="invalid_scenario",
                code=None,
                problems=list(exc.problems),
            )
        self.load(scenario)
        return JSONResponse({"ok": True, "models": sorted(scenario.models)})

    async def _get_requests(self, request: Request) -> Response:
        return JSONResponse({"requests": self._requests})

    async def _post_reset(self, request: Request) -> Response:
        self.reset()
        return JSONResponse({"ok": True})


def listen(host: str, port: int) -> socket.socket:
    """Bind and listen on ``host:port`` (``port`` 0 picks a free one).

    Connections queue in the kernel from this moment, so the address can be announced
    before :func:`serve` starts accepting.

    Raises:
        ConfigError: the address cannot be bound (in use, not local, not permitted).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Explicitly IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets whose proto
    # says TCP, and without it every keep-alive response stalls ~40 ms on delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError([f"cannot listen on {host}:{port}: {exc.strerror or exc}"]) from None
    return sock


class _Server(uvicorn.Server):
    # uvicorn waits for open requests before it stops; held ones (hang, delay) would only
    # end when its grace period cancels them mid-await, with a traceback on stderr.
    def __init__(self, config: uvicorn.Config, simulator: Simulator) -> None:
        super().__init__(config)
        self._simulator = simulator
        self._loop = asyncio.get_running_loop()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._loop.call_soon_threadsafe(self._simulator.stop)


def _uvicorn_config(simulator: Simulator) -> uvicorn.Config:
    return uvicorn.Config(
        simulator.app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )


@contextlib.asynccontextmanager
async def serving(simulator: Simulator, sock: socket.socket) -> AsyncIterator[None]:
    """Serve ``simulator`` on ``sock`` in the running loop while the block runs.

    For a caller in the same process (``foureyes eval run``'s scripted offline run): the
    socket listens already (:func:`listen`), so requests queue until the server accepts
    them. On leaving, held requests are answered HTTP 503 and the server stops; the
    socket and the simulator's log are closed.
    """
    server = _Server(_uvicorn_config(simulator), simulator)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        yield
    finally:
        server.should_exit = True
        simulator.stop()
        await asyncio.gather(task, return_exceptions=True)
        sock.close()
        simulator.close()


async def serve(simulator: Simulator, sock: socket.socket) -> None:
    """Serve ``simulator`` on the listening ``sock`` until SIGINT or SIGTERM.

    On the signal, held requests (``hang``, ``delay``) are answered HTTP 503 and the
    server stops. The socket and the simulator's log file are closed on return.
    """
    try:
        await _Server(_uvicorn_config(simulator), simulator).serve(sockets=[sock])
    finally:
        sock.close()
        simulator.close()
