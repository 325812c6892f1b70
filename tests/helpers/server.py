"""The foureyes app under test: in-process over ASGI, or under real uvicorn on loopback.

- ``app_client(app)``: runs the app's lifespan on the test's event loop and yields an
  ``httpx.AsyncClient`` speaking ASGI to it, with a chosen client address. Fast; for
  tests of handlers, dependencies and middleware.
- ``app_caller(app)``: the same client on an event loop of its own, in a thread, called
  synchronously (:class:`AppCaller`): one started app for every example of a hypothesis
  test, whose examples are synchronous.
- ``serve_app(app)``: real uvicorn on a free 127.0.0.1 port in a background thread (its
  own event loop), so the official ``openai`` SDK talks to it over TCP. Stopped on exit.
- ``start_server`` (fixture): ``start_server(config, environ)`` builds ``create_app`` and
  serves it as above; every server is stopped when the test ends.
- ``start_serve_process(...)``: the ``foureyes serve`` command as a subprocess.
- ``offline_serve`` (session): one ``foureyes serve`` with no config (offline routes, an
  SQLite store in its own folder) for every test that only sends it messages of their own
  conversation; starting the command costs a whole interpreter's imports.

Register with ``pytest_plugins = ["tests.helpers.server"]`` (or import the fixture).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from foureyes.config import Config
from foureyes.llm.simulate import listen
from foureyes.server import create_app
from tests.helpers.postgres import free_port

__all__ = [
    "AppCaller",
    "RunningServer",
    "app_caller",
    "app_client",
    "offline_serve",
    "serve_app",
    "start_serve_process",
    "start_server",
    "stop_process",
]

# Starting `foureyes serve` imports all of foureyes: ~4 s of CPU, 30 s on a busy 2-core machine.
_STARTUP_S = 120.0


@dataclass
class RunningServer:
    """A foureyes app listening on loopback."""

    url: str
    """Root URL, e.g. ``http://127.0.0.1:54321``."""
    base_url: str
    """The OpenAI base URL (``url + "/v1"``)."""
    port: int
    """The port it listens on."""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    """The ``foureyes serve`` subprocess, when it runs as one."""
    folder: Path | None = None
    """Its working directory, when it runs as one."""


@contextlib.asynccontextmanager
async def app_client(
    app: FastAPI, *, client_host: str = "127.0.0.1"
) -> AsyncIterator[httpx.AsyncClient]:
    """Start ``app`` (its lifespan) and yield a client reaching it from ``client_host``."""
    transport = httpx.ASGITransport(app=app, client=(client_host, 40000))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


class AppCaller:
    """An :func:`app_client` on its own event loop, in a thread; see :func:`app_caller`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient) -> None:
        self._loop = loop
        self.client = client
        """The client; use it only through :meth:`call` (it lives on the caller's loop)."""

    def call(self, method: str, url: str, **options: Any) -> httpx.Response:
        """Send one request (``httpx.AsyncClient.request``'s options) and wait for the answer."""
        request = self.client.request(method, url, **options)
        return asyncio.run_coroutine_threadsafe(request, self._loop).result(timeout=_STARTUP_S)


@contextlib.contextmanager
def app_caller(app: FastAPI, *, client_host: str = "127.0.0.1") -> Iterator[AppCaller]:
    """Start ``app`` on an event loop of its own, in a thread, until the block ends.

    Its lifespan is entered and left in one task (the thread's), as under a server; each
    :meth:`AppCaller.call` runs on that loop.

    Raises:
        Exception: whatever the app's start-up raised.
    """
    loop = asyncio.new_event_loop()
    ready: concurrent.futures.Future[AppCaller] = concurrent.futures.Future()
    stop = asyncio.Event()

    async def serve() -> None:
        try:
            async with app_client(app, client_host=client_host) as client:
                ready.set_result(AppCaller(loop, client))
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    try:
        yield ready.result(timeout=_STARTUP_S)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()


@contextlib.contextmanager
def serve_app(app: ASGIApp) -> Iterator[RunningServer]:
    """Serve ``app`` under uvicorn on a free loopback port until the block ends.

    Raises:
        RuntimeError: the app did not start (its lifespan failed; uvicorn logged why).
    """
    sock = listen("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + _STARTUP_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the app did not start on port {port} (see the log)")
            time.sleep(0.01)
        url = f"http://127.0.0.1:{port}"
        yield RunningServer(url=url, base_url=f"{url}/v1", port=port)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture
def start_server() -> Iterator[Callable[..., RunningServer]]:
    """``start_server(config, environ=None)``: serve ``create_app`` under uvicorn."""
    with contextlib.ExitStack() as stack:

        def start(config: Config, environ: Mapping[str, str] | None = None) -> RunningServer:
            app = create_app(config, dict(environ or {}))
            return stack.enter_context(serve_app(app))

        yield start


def start_serve_process(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    cpus: set[int] | None = None,
    command_name: Sequence[str] = ("serve",),
    health: str = "/healthz",
) -> RunningServer:
    """Run ``foureyes serve --port P ARGS`` and wait until ``/healthz`` answers.

    ``cpus``: the only CPUs the process (and its workers) may run on (Linux).
    ``command_name`` and ``health``: another serving command (``("owner", "serve")``)
    and the path that answers once it listens.

    Raises:
        RuntimeError: the process exited or did not answer in time (with its output).
    """
    port = free_port()
    command = [sys.executable, "-m", "foureyes.cli", *command_name, "--port", str(port), *args]
    if cpus is not None:
        # Pinned by the child itself before it becomes the server (no preexec_fn, which
        # is unsafe beside threads): the affinity is inherited through exec and by forks.
        pin = "import os, sys; os.sched_setaffinity(0, {0}); os.execv(sys.executable, {1})"
        command = [sys.executable, "-c", pin.format(sorted(cpus), command)]
    process = subprocess.Popen(
        command,
        env=dict(env),
        cwd=cwd,
        # Never the terminal: uvicorn's workers reopen stdin, and one read from a
        # terminal by a background process stops it.
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + _STARTUP_S
    while True:
        try:
            with urllib.request.urlopen(url + health, timeout=2):
                break
        except urllib.error.HTTPError:
            break  # it answers, if not healthy
        except (urllib.error.URLError, ConnectionError):
            if process.poll() is not None or time.monotonic() > deadline:
                output = stop_process(process)
                name = " ".join(command_name)
                raise RuntimeError(f"foureyes {name} did not start:\n{output}") from None
            time.sleep(0.05)
    return RunningServer(url=url, base_url=f"{url}/v1", port=port, process=process, folder=cwd)


@pytest.fixture(scope="session")
def offline_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """``foureyes serve`` with no config and its store at ``folder / "serve.db"``.

    Shared by the session: send it only messages without a conversation id, or with one no
    other test uses (each such message is a conversation of its own).
    """
    folder = tmp_path_factory.mktemp("offline-serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{folder / 'serve.db'}"
    server = start_serve_process([], env=env, cwd=folder)
    assert server.process is not None
    try:
        yield server
    finally:
        stop_process(server.process)


def stop_process(process: subprocess.Popen[bytes]) -> str:
    """Stop a server subprocess (SIGTERM, then SIGKILL) and return what it printed."""
    if process.poll() is None:
        process.terminate()
    try:
        output, _ = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output.decode(errors="replace")
