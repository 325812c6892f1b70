"""NeMo's IORails engine behind the thinnest HTTP hop: a bare ASGI app on uvicorn.

NeMo Guardrails 0.24.1's ``nemoguardrails server`` cannot run IORails: its
``server/api.py`` ``_get_rails`` builds every config as ``LLMRails(config=...,
verbose=True)``, with no option for the ``Guardrails`` wrapper. So benchmarks/gateway.py
serves ``Guardrails(config, use_iorails=True, require_iorails=True)`` through this file
instead: no framework, no validation beyond JSON, no access log; ``GET /healthz`` and
``POST /v1/chat/completions`` (OpenAI format, the request's ``messages`` passed to
``generate_async`` as they are, the reply returned as one ``chat.completion``). Anything
it does not serve is a 404. Run it with NeMo's own interpreter (benchmarks/.venv-nemo):

    .venv-nemo/bin/python benchmarks/nemo/iorails_asgi.py --config DIR --port N
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from typing import Any

os.environ.setdefault("NEMO_GUARDRAILS_NO_USAGE_STATS", "1")

import uvicorn  # noqa: E402  (after the env default)
from nemoguardrails import Guardrails, RailsConfig  # noqa: E402

Scope = dict[str, Any]
Receive = Any
Send = Any


class IORailsApp:
    """One ``Guardrails`` (IORails engine), started and stopped with the ASGI lifespan."""

    def __init__(self, config_dir: str) -> None:
        config = RailsConfig.from_path(config_dir)
        self.rails = Guardrails(config, use_iorails=True, require_iorails=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        elif scope["type"] == "http":
            await self.http(scope, receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.rails.startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.rails.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = (scope["method"], scope["path"])
        if route == ("GET", "/healthz"):
            await respond(send, 200, {"status": "ok"})
            return
        if route != ("POST", "/v1/chat/completions"):
            await respond(send, 404, {"error": "not found"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body)
        answer = await self.rails.generate_async(messages=request["messages"])
        content = answer.get("content") if isinstance(answer, dict) else str(answer)
        await respond(
            send,
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", "iorails"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            },
        )


async def respond(send: Send, status: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = IORailsApp(args.config)
    uvicorn.run(app, host="127.0.0.1", port=args.port, access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
