"""What does the gateway's HTTP app cost per reply, above ``Guard.reply``?

The gateway's app (``foureyes.server.create_app``, the config of ``gateway.py``: SQLite
store, both model roles on ``foureyes simulate`` at zero latency) is called through ASGI in
this process, with no HTTP server in front: each reply one ``POST /v1/chat/completions``
as the ``openai`` SDK sends it, handed to the app as uvicorn would hand it. Beside it,
``--system guard`` answers the same message with ``Guard.reply`` (same config), so the
difference is the app's layers: middleware, routing, FastAPI's handling, the request's
model, the response. After ``--warmup`` replies it counts ``--replies`` more at
``--clients`` concurrent callers and prints replies/s and the process's CPU per reply;
``--calls`` counts the Python function calls per reply instead (under ``cProfile``, so
no time is printed then): a count the machine's load does not move.

    python benchmarks/gateway_asgi.py [--system app|guard] [--replies 3000] [--calls]

Results: benchmarks/LOG.md ("The gateway's routes on the app itself").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gateway_parts import GATEWAY_MODEL, MESSAGE, InProcess, gateway_toml, scenario  # noqa: E402
from loadgen import drive, start_simulator, stop_process  # noqa: E402

from foureyes.config import load_config  # noqa: E402
from foureyes.server import create_app  # noqa: E402


def asgi_caller(app: Any) -> Callable[[int], Awaitable[None]]:
    """One reply: a ``POST /v1/chat/completions`` handed to ``app`` whole, as uvicorn would."""

    async def reply(n: int) -> None:
        body = json.dumps(
            {"model": GATEWAY_MODEL, "messages": [{"role": "user", "content": MESSAGE}]}
            | {"user": f"asgi-{n}-{time.monotonic_ns()}"}
        ).encode()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/chat/completions",
            "raw_path": b"/v1/chat/completions",
            "root_path": "",
            "query_string": b"",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        started: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # the client stays until the answer is sent
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started.append(message)

        await app(scope, receive, send)
        if not started or started[0]["status"] != 200:
            raise SystemExit(f"reply {n} was not answered 200: {started}")

    return reply


async def measure(system: str, replies: int, clients: int, warmup: int, calls: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        simulator, url = start_simulator(scenario(0.0), work)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if system == "guard":
                    guard = await InProcess.start("asgi", url, "reply", work)
                    stack.push_async_callback(guard.aclose)
                    reply: Callable[[int], Awaitable[Any]] = guard.reply
                else:
                    config = work / "gateway.toml"
                    store = f"sqlite+aiosqlite:///{work / 'gateway.db'}"
                    config.write_text(gateway_toml(url, store, False, True), encoding="utf-8")
                    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
                    app = create_app(load_config(config, environ=env), env)
                    await stack.enter_async_context(app.router.lifespan_context(app))
                    reply = asgi_caller(app)
                await drive(reply, warmup, clients)
                profile = cProfile.Profile() if calls else None
                cpu, started = time.process_time(), time.perf_counter()
                if profile is not None:
                    profile.enable()
                await drive(reply, replies, clients)
                if profile is not None:
                    profile.disable()
                    count = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
                    return f"{system}: {count / replies:.0f} Python calls per reply"
                cpu, wall = time.process_time() - cpu, time.perf_counter() - started
        finally:
            stop_process(simulator)
    return f"{system}: {replies / wall:.1f} replies/s, {1000 * cpu / replies:.3f} ms CPU/reply"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=["app", "guard"], default="app")
    parser.add_argument("--replies", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--calls", action="store_true")
    args = parser.parse_args()
    print(asyncio.run(measure(args.system, args.replies, args.clients, args.warmup, args.calls)))


if __name__ == "__main__":
    main()
