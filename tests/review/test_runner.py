"""The one reviewer runner: lifecycle first, then the packet contract, over real parts.

Reviewer faults are driven through the real ``foureyes simulate`` over HTTP; the offline
route and a tiny in-test provider (a real implementation of the Provider protocol) cover
what HTTP cannot time exactly.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foureyes.config import Config
from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Deadline
from foureyes.core.errors import (
    BudgetExhausted,
    ConfigError,
    DeadlineExceeded,
    RouteBadResponse,
    RouteHTTPError,
    RouteTimeout,
    StoreError,
    UsageError,
)
from foureyes.core.locale import Locale
from foureyes.core.trace import EventKind
from foureyes.llm.calls import ModelCaller
from foureyes.llm.prompting import neutralise
from foureyes.llm.provider import ChatRequest, ChatResult, ToolCall
from foureyes.llm.routes import Routes
from foureyes.review.offline import OFFLINE_NOTICE
from foureyes.review.packet import PacketRejection
from foureyes.review.publication import PublicationPolicy, publication_message
from foureyes.review.runner import (
    ReviewOutcome,
    ReviewReason,
    ReviewRunner,
    ReviewTrigger,
    reason_for_error,
)
from foureyes.store import Store
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import (
    REQUEST,
    open_caller,
    opened_store,
    packet,
    scenario,
    sim_config,
)
from tests.review.test_packet import satisfies_contract

MAX = 10_000


def sized_packet(chars: int) -> str:
    """A valid-looking update whose rendering is exactly ``chars`` characters."""
    base = len(json.dumps(json.loads(packet("x")), separators=(",", ":"), sort_keys=True))
    return packet("x" * (chars - base + 1))


async def events(store: Store, trace_id: str | None) -> list[tuple[EventKind, dict[str, Any]]]:
    assert trace_id is not None
    record = await store.traces.get(trace_id)
    assert record is not None
    return [(e.kind, dict(e.data)) for e in record.events]


async def test_the_offline_reviewer_s_notice_is_no_packet_and_never_published(
    tmp_path: Path,
) -> None:
    async with opened_store(tmp_path) as store, open_caller(Config(), store) as caller:
        runner = ReviewRunner(caller, packet_max_chars=MAX)
        outcome = await runner.run(
            REQUEST,
            deadline=Deadline.after(5),
            conversation_id="s1",
            policy=PublicationPolicy.ALL,
        )
        assert outcome.reason is ReviewReason.REVIEWER_OFFLINE and outcome.offline
        assert outcome.packet is None and not outcome.published
        assert "offline engine cannot review" in outcome.detail
        record = await store.traces.get(outcome.trace_id or "")
        assert record is not None
        assert record.run.kind == "review" and record.run.conversation_id == "s1"
        assert record.run.outcome == "no_packet" and record.run.reason == "reviewer_offline"
        assert record.run.meta["trigger"] == "manual"
        assert [e.kind for e in record.events][0] is EventKind.MODEL_CALL
        assert EventKind.PROPOSAL not in [e.kind for e in record.events]
    # What the offline engine answers is still its honest notice, in the session's language.
    assert set(OFFLINE_NOTICE) == set(Locale)


async def test_an_accepted_packet_over_http(simulator: RunningSimulator, tmp_path: Path) -> None:
    simulator.load(scenario({"content": packet("tests were never run")}))
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        outcome = await ReviewRunner(c, packet_max_chars=MAX).run(
            REQUEST, deadline=Deadline.after(5)
        )
    assert outcome.ok and outcome.packet is not None and not outcome.offline
    assert outcome.packet.items[0].content == "tests were never run"
    assert outcome.as_json()["rendered"] == outcome.packet.render()
    (sent,) = simulator.requests()
    assert sent["messages"][-1]["content"] == REQUEST.messages[-1].text


VALID = packet("the agent never ran the tests")

FAULTS: list[tuple[str, dict[str, Any], ReviewReason, PacketRejection | None]] = [
    ("times out", {"fault": "hang"}, ReviewReason.REVIEW_TIMEOUT, None),
    ("valid but too late", {"content": VALID, "fault": "delay", "delay_s": 5},
     ReviewReason.REVIEW_TIMEOUT, None),
    ("prose", {"content": "Looks good to me, carry on."}, ReviewReason.REVIEW_MALFORMED,
     PacketRejection.NO_JSON),
    ("role mismatch", {"content": VALID.replace("masked-review", "supervisor")},
     ReviewReason.REVIEW_MALFORMED, PacketRejection.ROLE_MISMATCH),
    ("duplicates", {"content": packet("Tests fail", " tests fail")},
     ReviewReason.REVIEW_MALFORMED, PacketRejection.DUPLICATE_ITEMS),
    ("10,001 chars", {"content": sized_packet(MAX + 1)}, ReviewReason.REVIEW_MALFORMED,
     PacketRejection.TOO_LONG),
    ("empty content", {"content": packet("fine", "  ")}, ReviewReason.REVIEW_MALFORMED,
     PacketRejection.EMPTY_CONTENT),
    ("no_update with []",
     {"content": json.dumps({"role": "masked-review", "status": "no_update", "items": []})},
     ReviewReason.REVIEW_MALFORMED, PacketRejection.ITEMS_ON_NO_UPDATE),
    ("cut at the token limit", {"content": VALID, "fault": "truncated"},
     ReviewReason.REVIEW_INCOMPLETE, None),
    ("valid text, finish_reason length", {"content": VALID, "finish_reason": "length"},
     ReviewReason.REVIEW_INCOMPLETE, None),
    ("valid text with a tool call", {"content": VALID, "tool_calls": [{"name": "read_file"}]},
     ReviewReason.REVIEW_INCOMPLETE, None),
    ("HTTP 500", {"fault": "http_500"}, ReviewReason.REVIEW_FAILED, None),
    ("HTTP 429", {"fault": "http_429"}, ReviewReason.REVIEW_FAILED, None),
    ("body not JSON", {"fault": "malformed_json"}, ReviewReason.REVIEW_FAILED, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "reason", "rejection"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS]
)
async def test_each_reviewer_fault_is_an_unpublished_packet_with_its_reason(
    simulator: RunningSimulator,
    tmp_path: Path,
    rule: dict[str, Any],
    reason: ReviewReason,
    rejection: PacketRejection | None,
) -> None:
    simulator.load(scenario(rule))
    # Only the hang and the late answer need the timeout to fire; the other faults get a
    # timeout no loaded machine reaches, so they cannot turn into a timeout by accident.
    config = sim_config(simulator, timeout_s=0.5 if reason is ReviewReason.REVIEW_TIMEOUT else 60)
    async with opened_store(tmp_path) as store, open_caller(config, store) as caller:
        outcome = await ReviewRunner(caller, packet_max_chars=MAX).run(
            REQUEST, deadline=Deadline.after(5)
        )
        assert outcome.packet is None and not outcome.ok
        assert (outcome.reason, outcome.rejection) == (reason, rejection)
        recorded = await events(store, outcome.trace_id)
        record = await store.traces.get(outcome.trace_id or "")
    assert record is not None
    assert (record.run.outcome, record.run.reason) == ("no_packet", reason.value)
    kinds = [kind for kind, _ in recorded]
    assert kinds == [EventKind.MODEL_CALL, EventKind.ERROR, EventKind.DECISION]
    error, decision = recorded[1][1], recorded[2][1]
    assert error["reason"] == reason.value
    assert error["rejection"] == (rejection.value if rejection else None)
    assert decision == {
        "outcome": "no_packet",
        "reason": reason.value,
        "rejection": rejection.value if rejection else None,
        "packet_sha256": None,
        "published": False,
    }
    assert len(simulator.requests()) == 1  # one-shot: a broken answer is not retried


async def test_abort_discards_even_a_valid_answer(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": VALID, "fault": "delay", "delay_s": 0.3}))
    abort = asyncio.Event()
    async with open_caller(sim_config(simulator)) as caller:
        runner = ReviewRunner(caller, packet_max_chars=MAX)
        task = asyncio.create_task(runner.run(REQUEST, deadline=Deadline.after(5), abort=abort))
        await asyncio.sleep(0.1)
        abort.set()
        outcome = await task
    assert outcome.reason is ReviewReason.REVIEW_ABORTED and outcome.packet is None


async def test_an_abort_before_the_start_makes_no_call(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": VALID}))
    abort = asyncio.Event()
    abort.set()
    async with open_caller(sim_config(simulator)) as caller:
        runner = ReviewRunner(caller, packet_max_chars=MAX)
        outcome = await runner.run(REQUEST, deadline=Deadline.after(5), abort=abort)
    assert outcome.reason is ReviewReason.REVIEW_ABORTED
    assert simulator.requests() == []


class ScriptedProvider:
    """A real Provider: answers every request with one scripted result."""

    def __init__(
        self, text: str, *, finish_reason: str | None = "stop", tool_calls: int = 0
    ) -> None:
        self.route = "scripted"
        self.text = text
        self.finish_reason = finish_reason
        self.tool_calls = tuple(
            ToolCall(id=f"c{i}", name="look", arguments="{}") for i in range(tool_calls)
        )
        self.on_call: asyncio.Event | None = None

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        if self.on_call is not None:
            self.on_call.set()
        return ChatResult(
            text=self.text,
            finish_reason=self.finish_reason,
            tool_calls=self.tool_calls,
            latency_s=0.0,
            route=self.route,
            model="scripted",
        )

    async def aclose(self) -> None:
        return None


def scripted_caller(provider: ScriptedProvider) -> ModelCaller:
    config = Config(
        routes={"scripted": {"kind": "offline"}},  # type: ignore[dict-item]
        roles={"reviewer": "scripted"},  # type: ignore[arg-type]
    )
    return ModelCaller(Routes(config, {"scripted": provider}))


async def test_an_abort_that_arrives_with_the_answer_still_wins() -> None:
    provider = ScriptedProvider(VALID)
    abort = asyncio.Event()
    provider.on_call = abort  # the abort is set while the valid answer is being returned
    outcome = await ReviewRunner(scripted_caller(provider), packet_max_chars=MAX).run(
        REQUEST, deadline=Deadline.after(5), abort=abort
    )
    assert outcome.reason is ReviewReason.REVIEW_ABORTED


async def test_cancelling_the_run_disposes_the_call_and_records_it(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"fault": "hang"}))
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        runner = ReviewRunner(c, packet_max_chars=MAX)
        task = asyncio.create_task(
            runner.run(REQUEST, deadline=Deadline.after(30), trigger=ReviewTrigger.CHECKPOINT)
        )
        while not simulator.requests():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (run_id,) = _review_runs(tmp_path / "review.db")
        record = await store.traces.get(run_id)
    assert record is not None
    assert (record.run.outcome, record.run.reason) == ("no_packet", "review_aborted")
    assert record.run.meta["trigger"] == "checkpoint"


def _review_runs(db_path: Path) -> list[str]:
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT trace_id FROM trace_runs WHERE kind = 'review'").fetchall()
    return [row[0] for row in rows]


async def test_a_passed_deadline_makes_no_call(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": VALID}))
    deadline = Deadline.after(0.01)
    await asyncio.sleep(0.02)
    async with open_caller(sim_config(simulator)) as caller:
        outcome = await ReviewRunner(caller, packet_max_chars=MAX).run(REQUEST, deadline=deadline)
    assert outcome.reason is ReviewReason.DEADLINE_EXCEEDED
    assert simulator.requests() == []


async def test_an_exhausted_budget_makes_no_call(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": VALID}))
    budget = CallBudget(1)
    budget.take()
    async with open_caller(sim_config(simulator)) as caller:
        runner = ReviewRunner(caller, packet_max_chars=MAX)
        outcome = await runner.run(REQUEST, deadline=Deadline.after(5), budget=budget)
    assert outcome.reason is ReviewReason.BUDGET_EXHAUSTED
    assert simulator.requests() == []


async def test_a_broken_store_means_no_call_and_no_packet(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": VALID}))
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        with sqlite3.connect(tmp_path / "review.db") as db:  # the database loses its tables
            db.execute("DROP TABLE trace_events")
            db.execute("DROP TABLE trace_runs")
        outcome = await ReviewRunner(c, packet_max_chars=MAX).run(
            REQUEST, deadline=Deadline.after(5)
        )
    assert outcome.reason is ReviewReason.REVIEW_FAILED and outcome.packet is None
    assert "start_run" in outcome.detail
    assert simulator.requests() == []  # an unrecordable run makes no call (invariant 10)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (RouteTimeout("r", 1.0), ReviewReason.REVIEW_TIMEOUT),
        (RouteHTTPError("r", 500), ReviewReason.REVIEW_FAILED),
        (RouteBadResponse("r"), ReviewReason.REVIEW_FAILED),
        (DeadlineExceeded("deadline", 2, 1), ReviewReason.DEADLINE_EXCEEDED),
        (BudgetExhausted("calls", 2, 1), ReviewReason.BUDGET_EXHAUSTED),
        (StoreError("reserve"), ReviewReason.REVIEW_FAILED),
    ],
)
def test_error_table(error: Exception, reason: ReviewReason) -> None:
    assert reason_for_error(error) is reason  # type: ignore[arg-type]


def test_misuse_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        reason_for_error(ConfigError(["x"]))
    with pytest.raises(UsageError):
        ReviewOutcome.no_packet(ReviewReason.ACCEPTED)
    with pytest.raises(UsageError):
        ReviewOutcome.no_packet(ReviewReason.REVIEW_TIMEOUT, rejection=PacketRejection.EMPTY)
    with pytest.raises(UsageError):
        ReviewRunner(scripted_caller(ScriptedProvider("")), packet_max_chars=0)


# --- invariant 4: any reviewer output → a fully valid packet, or nothing -----------------

answers = st.one_of(
    st.text(max_size=300),
    st.builds(
        lambda prefix, data, suffix: f"{prefix}{json.dumps(data)}{suffix}",
        st.sampled_from(["", "Here: ", "```json\n", "{", "{}"]),
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["masked-review", "reviewer"]),
                "status": st.sampled_from(["update", "no_update", "none"]),
            },
            optional={
                "items": st.lists(
                    st.fixed_dictionaries(
                        {
                            "kind": st.sampled_from(["observation", "suggestion", "vibe"]),
                            "certainty": st.sampled_from(["certain", "likely", "maybe"]),
                            "content": st.sampled_from(["", " ", "a", "A", "b", "x" * 80]),
                        }
                    ),
                    max_size=4,
                ),
                "extra": st.just(1),
            },
        ),
        st.sampled_from(["", "\n```", " trailing prose", "}"]),
    ),
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=answers,
    finish=st.sampled_from(["stop", "stop", "length", "content_filter", None]),
    tool_calls=st.sampled_from([0, 0, 0, 1]),
    max_chars=st.integers(min_value=30, max_value=300),
)
def test_any_answer_gives_a_fully_valid_packet_or_none(
    text: str, finish: str | None, tool_calls: int, max_chars: int
) -> None:
    provider = ScriptedProvider(text, finish_reason=finish, tool_calls=tool_calls)
    runner = ReviewRunner(scripted_caller(provider), packet_max_chars=max_chars)
    outcome = asyncio.run(
        runner.run(REQUEST, deadline=Deadline.after(5), policy=PublicationPolicy.ALL)
    )
    message = publication_message(outcome.packet, PublicationPolicy.ALL)
    if outcome.packet is None:
        assert message is None and not outcome.published
        return
    assert finish == "stop" and tool_calls == 0 and outcome.published
    assert message is not None
    shown = message.content.split(">>>\n", 1)[1].rsplit("\n<<<END DATA>>>", 1)[0]
    assert shown == neutralise(outcome.packet.render())  # the whole packet, as data
    assert satisfies_contract(json.loads(outcome.packet.render()), max_chars)


class _Tools:
    """Read-only tools that note what they were asked to do."""

    specs = ({"type": "function", "function": {"name": "read", "parameters": {}}},)

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call(self, name: str, arguments: str) -> str:
        self.calls.append(name)
        return "file text"


async def test_read_only_tool_calls_are_answered_and_the_reviewer_asked_again(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(
        scenario(
            {"times": 1, "tool_calls": [{"name": "read", "arguments": "{}"}]},
            {"match": "^file text$", "content": VALID},
        )
    )
    tools = _Tools()
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        outcome = await ReviewRunner(c, packet_max_chars=MAX).run(
            REQUEST, deadline=Deadline.after(5), tools=tools
        )
    assert outcome.ok and tools.calls == ["read"]
    _, second = simulator.requests()
    asked, answered = second["messages"][-2:]
    assert asked["role"] == "assistant" and asked["tool_calls"][0]["function"]["name"] == "read"
    assert answered == {
        "role": "tool",
        "content": "file text",
        "tool_call_id": asked["tool_calls"][0]["id"],
    }


async def test_a_tool_that_is_not_offered_still_ends_the_review_unrun(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"tool_calls": [{"name": "edit", "arguments": "{}"}]}))
    tools = _Tools()
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        outcome = await ReviewRunner(c, packet_max_chars=MAX).run(
            REQUEST, deadline=Deadline.after(5), tools=tools
        )
    assert outcome.reason is ReviewReason.REVIEW_INCOMPLETE and tools.calls == []
    assert len(simulator.requests()) == 1
