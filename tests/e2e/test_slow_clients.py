"""`foureyes serve` against clients that stall: a body deadline and a connection cap.

Real sockets on 127.0.0.1 against the real command. Every wait is a bounded number of
polls; no assertion is about elapsed time.
"""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.server import RunningServer, start_serve_process, stop_process

# Headers that promise 1,000 bytes, then 9 of them.
STALLED = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b'{"model":'
)
POLLS = 240
POLL_S = 0.25


def _env(tmp_path: Path, **server: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"
    return env | {f"FOUREYES_SERVER__{k.upper()}": v for k, v in server.items()}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[list[RunningServer]]:
    started: list[RunningServer] = []
    yield started
    for server in started:
        assert server.process is not None
        stop_process(server.process)


def _start(serve: list[RunningServer], tmp_path: Path, **server: str) -> RunningServer:
    running = start_serve_process([], env=_env(tmp_path, **server), cwd=tmp_path)
    serve.append(running)
    return running


def _stall(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(STALLED)
    sock.settimeout(POLL_S)
    return sock


def _read_until_closed(sock: socket.socket) -> tuple[bytes, bool]:
    """What the server sent, and whether it closed the connection, within POLLS polls."""
    data = b""
    for _ in range(POLLS):
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_body_that_stalls_is_answered_408_and_its_connection_closed(
    serve: list[RunningServer], tmp_path: Path
) -> None:
    server = _start(serve, tmp_path, body_timeout_s="1")
    stalled = [_stall(server.port) for _ in range(3)]

    outcomes = [_read_until_closed(sock) for sock in stalled]
    for sock in stalled:
        sock.close()

    for data, closed in outcomes:
        assert data.startswith(b"HTTP/1.1 408 "), data[:200]
        assert b'"code":"request_timeout"' in data
        assert closed
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert (
        'foureyes_http_requests_total{method="POST",route="/v1/chat/completions",status="408"}'
        " 3.0" in metrics
    )


def test_connections_beyond_the_cap_are_refused_and_the_cap_is_exact(
    serve: list[RunningServer], tmp_path: Path
) -> None:
    cap = 4
    server = _start(serve, tmp_path, max_connections=str(cap), body_timeout_s="600")
    stalled = [_stall(server.port) for _ in range(cap)]
    try:
        # Every connection is held now: a request on one more is refused.
        refused = [_status(server.url + "/healthz") for _ in range(3)]
        # The stalled ones were not answered (nor dropped): they hold their places.
        for sock in stalled:
            with pytest.raises(TimeoutError):
                sock.recv(1)
        # One place freed: a request is served again (once the server saw the close).
        stalled.pop().close()
        statuses = []
        for _ in range(POLLS):
            statuses.append(_status(server.url + "/healthz"))
            if statuses[-1] == 200:
                break
    finally:
        for sock in stalled:
            sock.close()

    assert refused == [503, 503, 503]
    assert statuses[-1] == 200
