"""``Guard.check_stream``: a draft streamed in gets the decision of the same draft whole.

The guard is the offline default (no config, an in-memory store); the chunks are dicts
or the ``openai`` SDK's own ``ChatCompletionChunk`` objects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from openai.types.chat import ChatCompletionChunk

from foureyes import Guard
from foureyes.core.errors import ContractError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import Outcome, ReplyMode, fallback_text
from tests.server.test_draft_stream import chunk, streams
from tests.test_guard import CALM, TEXT, user
from tests.test_guard import scratch as scratch  # the fixture


async def each(chunks: Iterable[Any]) -> AsyncIterator[Any]:
    for item in chunks:
        yield item


@pytest.fixture
async def guard(scratch: Path) -> AsyncIterator[Guard]:
    async with Guard.open(store="memory") as opened:
        yield opened


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stream=streams())
async def test_any_split_gets_the_decision_and_digest_of_the_unsplit_draft(
    guard: Guard, stream: tuple[str, list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    text, calls, chunks = stream
    whole = await guard.check(user(), {"content": text, "tool_calls": calls})
    split = await guard.check_stream(user(), each(chunks))
    for field in ("decision", "reason", "candidate_sha256", "delivered_sha256", "text"):
        assert getattr(split, field) == getattr(whole, field), field
    assert split.tool_calls == whole.tool_calls


async def test_sdk_chunks_are_taken_and_a_cut_off_stream_falls_back(guard: Guard) -> None:
    objects = [
        ChatCompletionChunk.model_validate(chunk({"content": p})) for p in ("I have", TEXT[6:])
    ]
    finished = [*objects, ChatCompletionChunk.model_validate(chunk({}, "stop"))]
    released = await guard.check_stream(user(), each(finished))
    cut = await guard.check_stream(user(), each(objects))

    whole = await guard.check(user(), TEXT)
    assert (released.decision, released.candidate_sha256) == (
        whole.decision,
        whole.candidate_sha256,
    )
    assert (cut.decision, cut.reason) == (Outcome.FALLBACK, ReasonCode.DRAFT_FAILED)
    assert cut.text == fallback_text(ReasonCode.DRAFT_FAILED, Locale.EN, mode=ReplyMode.GUARD)
    kinds = [run.kind for run in await guard.store.traces.list_runs()]
    assert kinds == ["draft_check"] * 3


async def test_bad_messages_or_an_oversize_draft_are_refused_and_nothing_is_recorded(
    guard: Guard,
) -> None:
    limit = guard.config.server.max_body_bytes
    with pytest.raises(ContractError) as bad:
        await guard.check_stream([{"role": "assistant", "content": CALM}], each([]))
    with pytest.raises(ContractError) as large:
        await guard.check_stream(user(), each([chunk({"content": "x" * (limit + 1)})]))
    assert (bad.value.schema, bad.value.detail.split(":")[0]) == ("check_stream", "messages")
    assert large.value.detail.startswith("chunks:")
    assert list(await guard.store.traces.list_runs()) == []
