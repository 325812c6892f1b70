"""The spine end to end over real HTTP: ModelCaller + structured parser + ledger + trace.

A capability calls a model through the simulator; each bad answer must end as a typed
failure with its reason, with the ledger settled and the trace complete.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from foureyes.config import Config, PrivacyConfig, StoreConfig
from foureyes.core.budget import CallBudget, utc_day
from foureyes.core.deadline import Deadline
from foureyes.core.errors import RouteRateLimited
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult
from foureyes.llm.routes import Routes
from foureyes.llm.structured import Clamped, ParseFailure, complete_structured
from foureyes.store import Store
from tests.helpers.simulator import RunningSimulator


class Mood(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    level: Literal["low", "high"]
    confidence: Annotated[float, Clamped(0, 1)]


ASK = ChatRequest(messages=(ChatMessage.user("how am I?"),))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 's.db'}"), PrivacyConfig(), {}
    )
    yield s
    await s.close()


def caller_for(simulator: RunningSimulator, store: Store, **route: object) -> ModelCaller:
    cfg = Config(
        routes={"sim": simulator.route("mood", timeout_s=2, **route)},
        roles={"risk_l1": "sim"},  # type: ignore[arg-type]
    )
    return ModelCaller(Routes.build(cfg, {}), ledger=store.ledger, trace=store.traces)


async def structured(caller: ModelCaller, store: Store) -> tuple[object, str]:
    trace_id = await store.traces.start_run("test")
    scope = CallScope(Deadline.after(10), CallBudget(4), trace_id)

    async def call(request: ChatRequest) -> ChatResult:
        return await caller.call(Role.RISK_L1, request, scope, stage="l1")

    try:
        return await complete_structured(call, ASK, Mood), trace_id
    finally:
        await caller.routes.aclose()


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ({"content": "I think you are fine, honestly."}, ParseFailure.NO_JSON),
        (
            {"content": '{"level": "high", "confidence": 0.9}', "fault": "truncated"},
            ParseFailure.TRUNCATED,
        ),
        (
            {"content": '{"level": "high", "confid', "finish_reason": "stop"},
            ParseFailure.INVALID_JSON,
        ),
        ({"content": '{"level": "super_high", "confidence": 0.9}'}, ParseFailure.ENUM_INVALID),
        (
            {"content": '{"level": "high", "confidence": 0.9, "note": "x"}'},
            ParseFailure.EXTRA_FIELDS,
        ),
    ],
)
async def test_bad_answers_end_as_typed_failures_after_one_retry(
    simulator: RunningSimulator, store: Store, rule: dict[str, object], reason: ParseFailure
) -> None:
    simulator.load({"models": {"mood": [rule]}})
    outcome, trace_id = await structured(caller_for(simulator, store, daily_calls=10), store)
    assert not outcome.ok  # type: ignore[attr-defined]
    assert outcome.reason is reason  # type: ignore[attr-defined]
    assert len(simulator.requests()) == 2  # the call and exactly one retry
    usage = await store.ledger.usage("route:sim", utc_day())
    assert (usage.calls, usage.reserved_calls) == (2, 0)
    record = await store.traces.get(trace_id)
    assert record is not None
    assert [e.kind for e in record.events] == [EventKind.MODEL_CALL, EventKind.MODEL_CALL]


async def test_prose_then_valid_answer_parses_and_clamps(
    simulator: RunningSimulator, store: Store
) -> None:
    simulator.load(
        {
            "models": {
                "mood": [
                    {"times": 1, "content": "Let me think about that."},
                    {"content": 'Sure! ```json\n{"level": "high", "confidence": 1.5}\n``` done'},
                ]
            }
        }
    )
    outcome, _ = await structured(caller_for(simulator, store), store)
    assert outcome.ok  # type: ignore[attr-defined]
    assert outcome.value == Mood(level="high", confidence=1.0)  # type: ignore[attr-defined]
    retry = simulator.requests()[1]["messages"]
    # The retry shows the model its own bad answer as an assistant turn, as data.
    assert retry[-2]["role"] == "assistant"


async def test_a_429_storm_raises_typed_errors_and_leaves_the_ledger_settled(
    simulator: RunningSimulator, store: Store
) -> None:
    simulator.load(
        {"models": {"mood": [{"fault": "http_429", "retry_after_s": 3, "content": "x"}]}}
    )
    caller = caller_for(simulator, store, daily_calls=100)
    trace_id = await store.traces.start_run("storm")

    async def one() -> BaseException | None:
        scope = CallScope(Deadline.after(10), CallBudget(1), trace_id)
        try:
            await caller.call(Role.RISK_L1, ASK, scope, stage="l1")
        except RouteRateLimited as exc:
            return exc
        return None

    try:
        errors = await asyncio.gather(*(one() for _ in range(25)))
    finally:
        await caller.routes.aclose()
    assert all(isinstance(e, RouteRateLimited) and e.retry_after_s == 3 for e in errors)
    usage = await store.ledger.usage("route:sim", utc_day())
    assert (usage.calls, usage.usd, usage.reserved_calls, usage.reserved_usd) == (25, 0.0, 0, 0.0)
    record = await store.traces.get(trace_id)
    assert record is not None
    outcomes = [json.dumps(dict(e.data)) for e in record.events]
    assert len(outcomes) == 25 and all("RouteRateLimited" in o for o in outcomes)


async def test_a_wrong_api_key_is_a_401_that_never_shows_the_key(
    simulator: RunningSimulator, store: Store
) -> None:
    from foureyes.core.errors import RouteHTTPError

    simulator.load({"api_key": "right-key", "models": {"mood": [{"content": "{}"}]}})
    cfg = Config(
        routes={"sim": simulator.route("mood", api_key_env="SIM_KEY")},
        roles={"risk_l1": "sim"},  # type: ignore[arg-type]
    )
    caller = ModelCaller(Routes.build(cfg, {"SIM_KEY": "wrong-key-123"}), trace=store.traces)
    scope = CallScope(Deadline.after(5), CallBudget(1), await store.traces.start_run("auth"))
    try:
        with pytest.raises(RouteHTTPError) as info:
            await caller.call(Role.RISK_L1, ASK, scope, stage="l1")
    finally:
        await caller.routes.aclose()
    assert info.value.status_code == 401
    assert "wrong-key-123" not in str(info.value)
    record = await store.traces.get(scope.trace_id or "")
    assert record is not None and "wrong-key-123" not in json.dumps(
        [dict(e.data) for e in record.events]
    )
