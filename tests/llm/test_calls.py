"""The metered model caller with real parts: the offline provider and an SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.config import Config, PrivacyConfig, RiskConfig, RouteConfig, StoreConfig
from foureyes.core.budget import CallBudget, SpendLimit, utc_day
from foureyes.core.deadline import Deadline
from foureyes.core.errors import (
    BudgetExhausted,
    DeadlineExceeded,
    RouteBadResponse,
    RouteConnectionError,
)
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind
from foureyes.llm.calls import CallScope, ModelCaller, non_crisis_limit
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.routes import Routes
from foureyes.store import Store
from tests.helpers.simulator import RunningSimulator

HELLO = ChatRequest(messages=(ChatMessage.user("I had a rough day"),))


def config(reserved_share: float = 0, **route: object) -> Config:
    """Every role on one offline route; by default none of it reserved for the crisis roles."""
    offline = RouteConfig(kind="offline", **route)  # type: ignore[arg-type]
    return Config(routes={"offline": offline}, risk=RiskConfig(reserved_share=reserved_share))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 's.db'}"), PrivacyConfig(), {}
    )
    yield s
    await s.close()


async def new_scope(store: Store, *, calls: int = 5, seconds: float = 10) -> CallScope:
    trace_id = await store.traces.start_run("test")
    return CallScope(Deadline.after(seconds), CallBudget(calls), trace_id)


async def model_calls(store: Store, trace_id: str | None) -> list[dict[str, object]]:
    assert trace_id is not None
    record = await store.traces.get(trace_id)
    assert record is not None
    return [dict(e.data) for e in record.events if e.kind is EventKind.MODEL_CALL]


async def test_a_call_is_served_and_recorded(store: Store) -> None:
    caller = ModelCaller(Routes.build(config(), {}), ledger=store.ledger, trace=store.traces)
    scope = await new_scope(store)
    result = await caller.call(Role.COUNSELOR, HELLO, scope, stage="draft")
    assert result.offline and result.text
    assert scope.budget.used == 1
    [event] = await model_calls(store, scope.trace_id)
    assert event["role"] == "counselor" and event["route"] == "offline"
    assert event["outcome"] == "ok" and event["offline"] is True


async def test_no_call_after_the_deadline(store: Store) -> None:
    caller = ModelCaller(Routes.build(config(), {}), ledger=store.ledger, trace=store.traces)
    trace_id = await store.traces.start_run("test")
    clock_value = [0.0]
    deadline = Deadline.after(1, clock=lambda: clock_value[0])
    clock_value[0] = 2.0
    scope = CallScope(deadline, CallBudget(3), trace_id)
    with pytest.raises(DeadlineExceeded):
        await caller.call(Role.COUNSELOR, HELLO, scope, stage="draft")
    assert scope.budget.used == 0
    assert await model_calls(store, trace_id) == []


async def test_run_call_budget_stops_before_the_provider(store: Store) -> None:
    caller = ModelCaller(Routes.build(config(), {}), ledger=store.ledger, trace=store.traces)
    scope = await new_scope(store, calls=1)
    await caller.call(Role.COUNSELOR, HELLO, scope, stage="draft")
    with pytest.raises(BudgetExhausted) as info:
        await caller.call(Role.COUNSELOR, HELLO, scope, stage="draft")
    assert info.value.limit == "calls"
    assert len(await model_calls(store, scope.trace_id)) == 1


async def test_route_daily_calls_are_kept_in_the_ledger_across_callers(store: Store) -> None:
    routes = Routes.build(config(daily_calls=2), {})
    for _ in range(2):
        caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
        await caller.call(Role.COUNSELOR, HELLO, await new_scope(store), stage="draft")
    with pytest.raises(BudgetExhausted):
        await caller.call(Role.COUNSELOR, HELLO, await new_scope(store), stage="draft")
    usage = await store.ledger.usage("route:offline", utc_day())
    assert (usage.calls, usage.reserved_calls) == (2, 0)


async def test_named_limits_are_reserved_too_and_released_when_one_refuses(store: Store) -> None:
    caller = ModelCaller(Routes.build(config(daily_calls=5), {}), ledger=store.ledger)
    per_conversation = SpendLimit("limit:l1:conv-1", max_calls=1)
    scope = await new_scope(store)
    await caller.call(Role.COUNSELOR, HELLO, scope, stage="l1", limits=[per_conversation])
    with pytest.raises(BudgetExhausted):
        await caller.call(Role.COUNSELOR, HELLO, scope, stage="l1", limits=[per_conversation])
    route_usage = await store.ledger.usage("route:offline", utc_day())
    # The refused call's route reservation was handed back, not counted.
    assert (route_usage.calls, route_usage.reserved_calls) == (1, 0)


async def test_a_failing_route_is_recorded_and_counted(store: Store) -> None:
    caller = ModelCaller(
        Routes.build(config(daily_calls=5), {}), ledger=store.ledger, trace=store.traces
    )
    scope = await new_scope(store)
    # The offline supervisor needs the candidate in the request's subject; without it the
    # engine answers with a typed failure, never a guessed verdict.
    with pytest.raises(RouteBadResponse):
        await caller.call(Role.SUPERVISOR, HELLO, scope, stage="review")
    [event] = await model_calls(store, scope.trace_id)
    assert event["outcome"] == "RouteBadResponse"
    assert (await store.ledger.usage("route:offline", utc_day())).calls == 1


async def test_an_unreachable_endpoint_spends_nothing(store: Store, tmp_path: Path) -> None:
    from tests.helpers.postgres import free_port

    port = free_port()  # nothing listens there
    route = RouteConfig(
        kind="openai",
        base_url=f"http://127.0.0.1:{port}/v1",
        model="m",
        timeout_s=5,
        daily_calls=3,
        daily_budget_usd=1.0,
        price_in=1.0,
        price_out=1.0,
    )
    cfg = Config(routes={"down": route}, roles={"counselor": "down"})  # type: ignore[arg-type]
    routes = Routes.build(cfg, {})
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    scope = await new_scope(store)
    try:
        with pytest.raises(RouteConnectionError):
            await caller.call(Role.COUNSELOR, HELLO, scope, stage="draft")
    finally:
        await routes.aclose()
    usage = await store.ledger.usage("route:down", utc_day())
    assert (usage.calls, usage.usd, usage.reserved_calls) == (0, 0.0, 0)
    [event] = await model_calls(store, scope.trace_id)
    assert event["outcome"] == "RouteConnectionError"


async def test_a_cancelled_call_is_recorded_as_cancelled_and_charged_the_worst_case(
    store: Store, simulator: RunningSimulator
) -> None:
    import asyncio

    simulator.load({"models": {"slow": [{"fault": "hang", "content": "x"}]}})
    route = simulator.route(
        "slow", timeout_s=30, daily_budget_usd=10.0, price_in=1.0, price_out=1.0
    )
    cfg = Config(routes={"sim": route}, roles={"counselor": "sim"})  # type: ignore[arg-type]
    routes = Routes.build(cfg, {})
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    scope = await new_scope(store)
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await caller.call(Role.COUNSELOR, HELLO, scope, stage="draft")
    finally:
        await routes.aclose()
    [event] = await model_calls(store, scope.trace_id)
    assert event["outcome"] == "cancelled"
    usage = await store.ledger.usage("route:sim", utc_day())
    assert usage.calls == 1 and usage.usd > 0 and usage.reserved_calls == 0


@given(
    calls=st.integers(min_value=0, max_value=1_000_000),
    percent=st.integers(min_value=1, max_value=90),
)
def test_the_non_crisis_limit_keeps_at_least_the_reserved_share(calls: int, percent: int) -> None:
    share = percent / 100
    limit = non_crisis_limit("r", RouteConfig(kind="offline", daily_calls=calls), share)
    assert limit is not None and limit.key == "route:r:non_crisis"
    assert limit.max_calls is not None and limit.max_usd is None
    kept = calls - limit.max_calls
    # At least the share (exactly, no float rounding), and less than one call more.
    assert kept * 100 >= calls * percent > (kept - 1) * 100


def test_nothing_is_reserved_at_share_zero_or_without_limits() -> None:
    assert non_crisis_limit("r", RouteConfig(kind="offline", daily_calls=5), 0) is None
    assert non_crisis_limit("r", RouteConfig(kind="offline"), 0.2) is None
    priced = RouteConfig(kind="offline", daily_budget_usd=2.0, price_in=1, price_out=1)
    limit = non_crisis_limit("r", priced, 0.25)
    assert limit is not None and (limit.max_calls, limit.max_usd) == (None, 1.5)


async def test_only_the_non_crisis_roles_of_a_shared_route_count_against_its_split(
    store: Store,
) -> None:
    cfg = Config(
        routes={
            "shared": RouteConfig(kind="offline", daily_calls=10),
            "own": RouteConfig(kind="offline", daily_calls=10),
        },
        roles={"counselor": "shared", "risk_l1": "shared", "risk_l2": "own"},  # type: ignore[arg-type]
    )
    caller = ModelCaller(Routes.build(cfg, {}), ledger=store.ledger)
    assessable = HELLO.model_copy(update={"subject": {"text": "I had a rough day"}})
    for role in (Role.COUNSELOR, Role.RISK_L1, Role.RISK_L2):
        await caller.call(role, assessable, await new_scope(store), stage="test")

    today = utc_day()
    assert (await store.ledger.usage("route:shared", today)).calls == 2
    assert (await store.ledger.usage("route:shared:non_crisis", today)).calls == 1
    assert (await store.ledger.usage("route:own", today)).calls == 1
    assert (await store.ledger.usage("route:own:non_crisis", today)).calls == 0
