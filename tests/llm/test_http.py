"""The lean transport's HTTP/1.1 client against a scripted server on 127.0.0.1.

Each test's server reads whole requests and answers with exactly the bytes the test
scripts (split as it says), so framing, reuse and failure are seen as on the wire. The
provider-level behaviour (typed errors, timeouts, streams, proxies) is tested through
the simulator in test_openai_compat.py, on every transport. Every test runs on asyncio's
own event loop and on uvloop's, which ``foureyes serve`` runs (tests/llm/conftest.py).
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foureyes.llm._http import HttpOrigin, ResponseTooLarge, TransportError

Script = Callable[["Exchange"], Awaitable[None]]


@dataclass
class Exchange:
    """One request as the server read it, and the writer to answer on."""

    head: bytes
    body: bytes
    writer: asyncio.StreamWriter
    connection: int

    async def send(self, *parts: bytes) -> None:
        for part in parts:
            self.writer.write(part)
            await self.writer.drain()


@dataclass
class Server:
    url: str
    requests: list[Exchange] = field(default_factory=list)
    connections: int = 0


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(
        *scripts: Script, ssl_context: ssl.SSLContext | None = None, path: str = "/v1/chat"
    ) -> Server:
        pending = list(scripts)
        server = Server("")

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            server.connections += 1
            number = server.connections
            try:
                while (request := await _read_request(reader)) is not None:
                    exchange = Exchange(*request, writer, number)
                    server.requests.append(exchange)
                    await pending.pop(0)(exchange)
                    if writer.is_closing():
                        return
            finally:
                writer.close()

        listening = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
        servers.append(listening)
        port = listening.sockets[0].getsockname()[1]
        scheme = "https" if ssl_context is not None else "http"
        server.url = f"{scheme}://127.0.0.1:{port}{path}"
        return server

    yield start
    for listening in servers:
        listening.close()


def ok(body: bytes, *extra: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"".join(extra)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def answer(*parts: bytes) -> Script:
    async def script(exchange: Exchange) -> None:
        await exchange.send(*parts)

    return script


def close_after(*parts: bytes) -> Script:
    async def script(exchange: Exchange) -> None:
        await exchange.send(*parts)
        exchange.writer.close()

    return script


HEADERS = {"Authorization": "Bearer k", "Content-Type": "application/json"}


async def test_a_post_sends_one_exact_request_and_reuses_the_connection(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(answer(ok(b'{"a": 1}')), answer(ok(b'{"b": 2}', b"X-Two: 2\r\n")))
    origin = HttpOrigin(server.url + "?api-version=1")
    try:
        first = await origin.post(b'{"q": "\xc3\xa9"}', HEADERS)
        second = await origin.post(b"{}", HEADERS)
    finally:
        await origin.aclose()
    assert (first.status, first.body, second.body) == (200, b'{"a": 1}', b'{"b": 2}')
    assert second.headers["x-two"] == "2" and second.headers["content-type"] == "application/json"
    assert server.connections == 1
    request = server.requests[0]
    lines = request.head.decode("latin-1").split("\r\n")
    assert lines[0] == "POST /v1/chat?api-version=1 HTTP/1.1"
    assert lines[1] == f"Host: {server.url.split('/')[2]}"
    assert "Authorization: Bearer k" in lines and "Accept-Encoding: identity" in lines
    assert "Content-Length: 11" in lines
    assert request.body == b'{"q": "\xc3\xa9"}'


async def test_a_chunked_body_split_into_single_bytes_is_read_whole(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    wire += b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    server = await serve(answer(*(wire[i : i + 1] for i in range(len(wire)))), answer(ok(b"2")))
    origin = HttpOrigin(server.url)
    try:
        assert (await origin.post(b"{}", HEADERS)).body == b"hello world"
        assert (await origin.post(b"{}", HEADERS)).body == b"2"
    finally:
        await origin.aclose()
    assert server.connections == 1


@pytest.mark.parametrize(
    "first",
    [
        # Framed by the end of the connection (no length, not chunked).
        close_after(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\nuntil-close"),
        # A whole response that says the connection ends with it (the server then keeps
        # it open all the same: the client must not send on it).
        answer(ok(b"until-close", b"Connection: close\r\n")),
        # HTTP/1.0 does not keep connections unless asked to.
        answer(ok(b"until-close").replace(b"HTTP/1.1", b"HTTP/1.0")),
    ],
    ids=["eof-framed", "connection-close", "http-1.0"],
)
async def test_a_connection_that_ends_with_its_response_is_not_reused(
    serve: Callable[..., Awaitable[Server]], first: Script
) -> None:
    server = await serve(first, answer(ok(b"next")))
    origin = HttpOrigin(server.url)
    try:
        assert (await origin.post(b"{}", HEADERS)).body == b"until-close"
        assert (await origin.post(b"{}", HEADERS)).body == b"next"
    finally:
        await origin.aclose()
    assert server.connections == 2


async def test_a_connection_idle_longer_than_kept_is_not_reused(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(answer(ok(b"one")), answer(ok(b"two")))
    origin = HttpOrigin(server.url, keep_idle_s=0)  # every idle connection is too old
    try:
        assert (await origin.post(b"{}", HEADERS)).body == b"one"
        assert (await origin.post(b"{}", HEADERS)).body == b"two"
    finally:
        await origin.aclose()
    assert server.connections == 2


async def test_an_interim_response_is_skipped(serve: Callable[..., Awaitable[Server]]) -> None:
    server = await serve(answer(b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n", ok(b"final")))
    origin = HttpOrigin(server.url)
    try:
        reply = await origin.post(b"{}", HEADERS)
    finally:
        await origin.aclose()
    assert (reply.status, reply.body) == (200, b"final")
    assert "x-interim" not in reply.headers


@pytest.mark.parametrize(
    "broken",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf",  # cut off mid-body
        b"HTTP/1.1 200 OK\r\nContent-Len",  # cut off mid-headers
        b"",  # closed without a byte
        b"NOT HTTP AT ALL\r\n\r\n",  # malformed
    ],
    ids=["mid-body", "mid-headers", "nothing", "malformed"],
)
async def test_a_broken_response_fails_and_the_next_call_gets_a_new_connection(
    serve: Callable[..., Awaitable[Server]], broken: bytes
) -> None:
    server = await serve(close_after(broken), answer(ok(b"fine")))
    origin = HttpOrigin(server.url)
    try:
        with pytest.raises(TransportError):
            await origin.post(b"{}", HEADERS)
        assert (await origin.post(b"{}", HEADERS)).body == b"fine"
    finally:
        await origin.aclose()
    assert server.connections == 2


async def test_a_host_name_is_reached_on_whichever_address_answers(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    # "localhost" may name ::1 first; the server listens on 127.0.0.1 only.
    server = await serve(answer(ok(b"found")))
    origin = HttpOrigin(server.url.replace("127.0.0.1", "localhost"))
    try:
        reply = await origin.post(b"{}", HEADERS)
    finally:
        await origin.aclose()
    assert reply.body == b"found"
    port = server.url.split(":")[2].split("/")[0]
    assert f"Host: localhost:{port}" in server.requests[0].head.decode()


async def test_a_closed_port_is_a_transport_error_from_the_refusal() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    origin = HttpOrigin(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(TransportError) as caught:
        await origin.post(b"{}", HEADERS)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


async def test_an_encoded_body_that_was_not_asked_for_is_refused(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(answer(ok(b"\x1f\x8b...", b"Content-Encoding: gzip\r\n")))
    origin = HttpOrigin(server.url)
    try:
        with pytest.raises(TransportError, match="gzip"):
            await origin.post(b"{}", HEADERS)
    finally:
        await origin.aclose()


async def test_a_body_over_the_limit_is_refused_and_its_connection_closed(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(answer(ok(b"x" * 100)), answer(ok(b"small")))
    origin = HttpOrigin(server.url, max_body_bytes=64)
    try:
        with pytest.raises(ResponseTooLarge):
            await origin.post(b"{}", HEADERS)
        assert (await origin.post(b"{}", HEADERS)).body == b"small"
    finally:
        await origin.aclose()
    assert server.connections == 2


async def test_a_call_cancelled_mid_response_closes_its_connection(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    stalled = asyncio.Event()

    async def stall(exchange: Exchange) -> None:
        await exchange.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal")
        stalled.set()
        await asyncio.sleep(3600)

    server = await serve(stall, answer(ok(b"fine")))
    origin = HttpOrigin(server.url)
    try:
        call = asyncio.ensure_future(origin.post(b"{}", HEADERS))
        await stalled.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await origin.post(b"{}", HEADERS)).body == b"fine"
    finally:
        await origin.aclose()
    assert server.connections == 2


async def test_a_response_nobody_asked_for_retires_the_connection(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    # A second response in the same bytes as the first: it is neither read as part of
    # the first nor kept for the next call; the connection is closed.
    server = await serve(answer(ok(b"first") + ok(b"stray")), answer(ok(b"second")))
    origin = HttpOrigin(server.url)
    try:
        assert (await origin.post(b"{}", HEADERS)).body == b"first"
        assert (await origin.post(b"{}", HEADERS)).body == b"second"
    finally:
        await origin.aclose()
    assert server.connections == 2


async def test_a_stream_hands_over_each_piece_as_it_arrives(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    taken = asyncio.Event()

    async def paced(exchange: Exchange) -> None:
        await exchange.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await exchange.send(b"6\r\nfirst \r\n")
        await taken.wait()  # the second piece only once the first was handed over
        await exchange.send(b"6\r\nsecond\r\n0\r\n\r\n")

    server = await serve(paced, answer(ok(b"after")))
    origin = HttpOrigin(server.url)
    pieces: list[bytes] = []
    try:
        async with origin.stream(b"{}", HEADERS) as reply:
            assert reply.status == 200
            async for piece in reply.chunks():
                pieces.append(piece)
                taken.set()
        assert (await origin.post(b"{}", HEADERS)).body == b"after"
    finally:
        await origin.aclose()
    assert pieces == [b"first ", b"second"]
    assert server.connections == 1  # read to its end: kept


async def test_a_stream_left_before_its_end_closes_its_connection(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def endless(exchange: Exchange) -> None:
        await exchange.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while not exchange.writer.is_closing():
            await exchange.send(b"5\r\nmore.\r\n")
            await asyncio.sleep(0.01)

    server = await serve(endless, answer(ok(b"next")))
    origin = HttpOrigin(server.url)
    try:
        async with origin.stream(b"{}", HEADERS) as reply:
            async for _ in reply.chunks():
                break
        assert (await origin.post(b"{}", HEADERS)).body == b"next"
    finally:
        await origin.aclose()
    assert server.connections == 2


async def test_a_stream_cut_off_fails_after_what_arrived(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(
        close_after(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\npart\r\n")
    )
    origin = HttpOrigin(server.url)
    pieces: list[bytes] = []
    try:
        with pytest.raises(TransportError):
            async with origin.stream(b"{}", HEADERS) as reply:
                async for piece in reply.chunks():
                    pieces.append(piece)
    finally:
        await origin.aclose()
    assert pieces == [b"part"]


async def test_a_large_stream_read_slowly_arrives_whole(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    # More than the client buffers before it pauses reading: flow control must resume it.
    block = bytes(range(256)) * 256  # 64 KiB
    count = 48  # 3 MiB

    async def big(exchange: Exchange) -> None:
        await exchange.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(count):
            await exchange.send(b"%x\r\n" % len(block) + block + b"\r\n")
        await exchange.send(b"0\r\n\r\n")

    server = await serve(big)
    origin = HttpOrigin(server.url)
    received = bytearray()
    try:
        async with origin.stream(b"{}", HEADERS) as reply:
            async for piece in reply.chunks():
                received += piece
                if len(received) < len(block):
                    await asyncio.sleep(0.05)  # a slow reader first: the buffer fills
    finally:
        await origin.aclose()
    assert bytes(received) == block * count


async def test_an_error_body_of_a_stream_is_read_whole(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    body = b'{"error": {"code": "rate_limit_exceeded"}}'
    server = await serve(answer(ok(body).replace(b"200 OK", b"429 Too Many Requests")))
    origin = HttpOrigin(server.url)
    try:
        async with origin.stream(b"{}", HEADERS) as reply:
            assert (reply.status, await reply.read()) == (429, body)
    finally:
        await origin.aclose()


@pytest.mark.parametrize("url", ["ftp://host/x", "http:///nohost", "not a url"])
def test_an_origin_needs_an_http_url_with_a_host(url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        HttpOrigin(url)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key), made by openssl."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_https_checks_the_certificate(
    serve: Callable[..., Awaitable[Server]], certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    server = await serve(answer(ok(b"secret")), ssl_context=server_side)
    trusting = ssl.create_default_context(cafile=str(cert))
    origin = HttpOrigin(server.url, ssl_context=trusting)
    untrusting = HttpOrigin(server.url)  # the system's certificates: not this one
    try:
        assert (await origin.post(b"{}", HEADERS)).body == b"secret"
        with pytest.raises(TransportError) as caught:
            await untrusting.post(b"{}", HEADERS)
        assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)
    finally:
        await origin.aclose()
        await untrusting.aclose()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    body=st.binary(max_size=300),
    chunks=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=10),
)
async def test_any_chunking_split_anyhow_reads_back_the_body(
    serve: Callable[..., Awaitable[Server]],
    body: bytes,
    chunks: Sequence[int],
    cuts: Sequence[int],
) -> None:
    wire = bytearray(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    rest, sizes = body, iter(chunks * (len(body) + 1))
    while rest:
        size = next(sizes)
        wire += b"%x\r\n" % len(rest[:size]) + rest[:size] + b"\r\n"
        rest = rest[size:]
    wire += b"0\r\n\r\n"
    pieces, at, steps = [], 0, iter(cuts * (len(wire) + 1))
    while at < len(wire):
        step = next(steps)
        pieces.append(bytes(wire[at : at + step]))
        at += step
    server = await serve(answer(*pieces))
    origin = HttpOrigin(server.url)
    try:
        assert (await origin.post(b"{}", HEADERS)).body == body
    finally:
        await origin.aclose()
