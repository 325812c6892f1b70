"""Record and replay: a recorded exchange replays exactly; an unseen one fails loudly."""

from __future__ import annotations

from pathlib import Path

import pytest

from foureyes.config import RouteConfig
from foureyes.core.errors import UsageError
from foureyes.core.roles import Role
from foureyes.evals.cassette import (
    CassetteMiss,
    RecordingProvider,
    ReplayProvider,
    eval_providers,
    load_cassette,
)
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.routes import build_provider
from tests.evals._support import eval_config


def _request(text: str) -> ChatRequest:
    return ChatRequest(
        messages=(ChatMessage.user(text),), role=Role.RISK_L1, subject={"text": text}
    )


async def test_a_recorded_exchange_replays_and_an_unseen_one_raises(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    live = build_provider("offline", RouteConfig(kind="offline"), {})
    recorder = RecordingProvider(live, cassette)
    recorded = await recorder.complete(_request("I am tired"), timeout_s=5)
    await recorder.aclose()
    replay = ReplayProvider("offline", load_cassette(cassette))
    assert await replay.complete(_request("I am tired"), timeout_s=5) == recorded
    with pytest.raises(CassetteMiss) as caught:
        await replay.complete(_request("something never recorded"), timeout_s=5)
    assert caught.value.route == "offline"
    # Another route never matches: the key covers the route.
    other = ReplayProvider("strong", load_cassette(cassette))
    with pytest.raises(CassetteMiss):
        await other.complete(_request("I am tired"), timeout_s=5)


def test_a_corrupt_cassette_is_refused_with_its_line(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    cassette.write_text('{"key": "k"}\n', encoding="utf-8")
    with pytest.raises(UsageError, match="c.jsonl:1"):
        load_cassette(cassette)
    with pytest.raises(UsageError, match="cannot read"):
        load_cassette(tmp_path / "missing.jsonl")


def test_eval_providers_replay_builds_no_live_provider(tmp_path: Path) -> None:
    cfg = eval_config(tmp_path)
    cassette = tmp_path / "c.jsonl"
    cassette.write_text("", encoding="utf-8")
    providers = eval_providers(cfg, ["offline", "strong"], {}, replay=cassette)
    assert all(isinstance(p, ReplayProvider) for p in providers.values())
    recording = eval_providers(cfg, ["offline"], {}, record=cassette)
    assert isinstance(recording["offline"], RecordingProvider)
    with pytest.raises(UsageError, match="not both"):
        eval_providers(cfg, ["offline"], {}, record=cassette, replay=cassette)
