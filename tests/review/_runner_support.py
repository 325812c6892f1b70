"""Shared pieces of the runner, publication, ensemble and leak tests: real parts only."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from foureyes.config import Config, PrivacyConfig, StoreConfig
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.routes import Routes
from foureyes.review.packet import PACKET_ROLE, review_instruction
from foureyes.review.projection import Mask
from foureyes.store import Store
from tests.helpers.simulator import RunningSimulator, read_cassette
from tests.review._session_support import CASSETTES as CASSETTE_NAMES
from tests.review._session_support import TRAJECTORIES, TRAJECTORY_FILES

REVIEWER_MODEL = "sim-reviewer"

REQUEST = ChatRequest(
    messages=(
        ChatMessage.system("You are a coding agent."),
        ChatMessage.user("Fix the failing test in utils.py."),
        ChatMessage.user(review_instruction(max_chars=10_000, mask=Mask.REASONING_ONLY)),
    )
)


def packet(*contents: str, kind: str = "observation", certainty: str = "likely") -> str:
    """A valid ``update`` packet (or ``no_update`` when no contents), as JSON text."""
    if not contents:
        return json.dumps({"role": PACKET_ROLE, "status": "no_update"})
    items = [{"kind": kind, "certainty": certainty, "content": c} for c in contents]
    return json.dumps({"role": PACKET_ROLE, "status": "update", "items": items})


def sim_config(simulator: RunningSimulator, *, timeout_s: float = 5.0, **review: Any) -> Config:
    """Every role offline except the reviewer, which is the simulator's ``sim-reviewer``."""
    return Config(
        routes={"sim": simulator.route(REVIEWER_MODEL, timeout_s=timeout_s)},
        roles={"reviewer": "sim"},  # type: ignore[arg-type]
        review=review,  # type: ignore[arg-type]
    )


@asynccontextmanager
async def open_caller(config: Config, store: Store | None = None) -> AsyncIterator[ModelCaller]:
    """A caller over ``config``'s routes, metered and traced by ``store``; routes closed after."""
    routes = Routes.build(config, {})
    try:
        yield ModelCaller(
            routes,
            ledger=store.ledger if store else None,
            trace=store.traces if store else None,
        )
    finally:
        await routes.aclose()


def scenario(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"models": {REVIEWER_MODEL: list(rules)}}


@asynccontextmanager
async def opened_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 'review.db'}"), PrivacyConfig(), {}
    )
    try:
        yield store
    finally:
        await store.close()


# --- real trajectories ------------------------------------------------------------------

SESSION_FILES = sorted(path for path, _ in TRAJECTORY_FILES.values())
"""The trajectory files ``foureyes review`` reads as they are (tests that read them
directly use the ``third_party_data`` fixture)."""
CASSETTES = sorted(TRAJECTORIES / "cassettes" / name for name in CASSETTE_NAMES.values())
"""Recorded HTTP traffic; :func:`cassette_bodies` turns it into OpenAI chat sessions."""


def _streamed_message(body: str) -> dict[str, Any]:
    """The assistant message an SSE stream of chat-completion chunks adds up to."""
    message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": ""}
    for line in body.splitlines():
        data = line.removeprefix("data:").strip()
        if not line.startswith("data:") or data == "[DONE]":
            continue
        for choice in json.loads(data).get("choices", []):
            delta = choice.get("delta", {})
            for key in ("content", "reasoning_content"):
                message[key] += delta.get(key) or ""
    return message


def _response_message(response: dict[str, Any]) -> dict[str, Any]:
    parsed = response.get("parsed_body")
    if parsed is None:
        return _streamed_message(response["body"]["string"])
    wire = parsed["choices"][0]["message"]
    keep = ("role", "content", "reasoning_content", "tool_calls")
    return {k: wire[k] for k in keep if wire.get(k) is not None}


def cassette_bodies(path: Path) -> dict[str, dict[str, Any]]:
    """OpenAI chat request bodies (messages and tools) from the cassette's chat interactions.

    For the last chat-completions interaction, two sessions: ``done`` (the request's
    messages plus the recorded answer) and ``asked`` (the messages as the primary was sent
    them, before it answered).
    """
    chats = [
        i for i in read_cassette(path) if str(i["request"]["uri"]).endswith("/chat/completions")
    ]
    last = chats[-1]
    body = last["request"]["parsed_body"]
    asked = {"messages": body["messages"], "tools": body.get("tools", [])}
    done = {**asked, "messages": [*body["messages"], _response_message(last["response"])]}
    return {"done": done, "asked": asked}
