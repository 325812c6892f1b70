"""End to end: the gate over real HTTP, against ``foureyes simulate`` faults.

Counselor and Supervisor are two models of the session's simulator, reached through the
``openai`` route kind; the store is a real SQLite file. Each fault shows its fallback, its
own reason, and that the candidate was not delivered.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from foureyes.config import Config, GateConfig, RolesConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.reasons import ReasonCode
from foureyes.core.trace import EventKind
from foureyes.gate import GateOutcome, GateRunner, Outcome, ReplyRequest, fallback_text
from foureyes.gate.offline import CANNOT_JUDGE
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.store import Store
from tests.helpers.simulator import SCENARIOS, RunningSimulator

DRAFT = "Thank you for telling me. That sounds heavy; what feels hardest right now?"
MESSAGE = "I had a rough day at work and I can't sleep."


def supervisor_says(decision: str = "approve", **fields: Any) -> str:
    body = {"candidate_sha256": "{{candidate_sha256}}", "decision": decision, **fields}
    return json.dumps(body)


REJECT = supervisor_says(
    "reject", violations=[{"rule": "dismissive", "span": [0, 5], "note": "cold"}], missing=[]
)


@pytest.fixture
async def sim_runner(simulator: RunningSimulator, store: Store) -> AsyncIterator[Any]:
    """Build runners over the simulator (``GateConfig`` keywords); close their routes after."""
    built: list[Routes] = []

    def make(*, route_timeout_s: float = 2, **gate: Any) -> GateRunner:
        config = Config(
            routes={
                "counselor_sim": simulator.route("counselor-sim", timeout_s=route_timeout_s),
                "supervisor_sim": simulator.route("supervisor-sim", timeout_s=route_timeout_s),
            },
            roles=RolesConfig(counselor="counselor_sim", supervisor="supervisor_sim"),
            gate=GateConfig(**gate),
        )
        routes = Routes.build(config, {})
        built.append(routes)
        caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
        return GateRunner(caller, traces=store.traces, unknowns=store.unknowns)

    yield make
    for routes in built:
        await routes.aclose()


def scenario(counselor: list[dict[str, Any]], supervisor: list[dict[str, Any]]) -> dict[str, Any]:
    return {"models": {"counselor-sim": counselor, "supervisor-sim": supervisor}}


def supervisor_requests(simulator: RunningSimulator) -> list[dict[str, Any]]:
    return [r for r in simulator.requests() if r["model"] == "supervisor-sim"]


def assert_fallback(outcome: GateOutcome, reason: ReasonCode) -> None:
    assert outcome.decision is Outcome.FALLBACK and outcome.reason is reason
    assert outcome.text == fallback_text(reason, outcome.locale)
    assert DRAFT not in outcome.text and outcome.candidate_sha256 is None


async def test_an_approval_of_the_exact_digest_releases_the_draft(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [{"content": supervisor_says()}]))

    outcome = await sim_runner().reply(ReplyRequest(message=MESSAGE))

    assert outcome.decision is Outcome.RELEASED and outcome.text == DRAFT
    assert outcome.candidate_sha256 == sha256_hex(DRAFT)
    [review] = supervisor_requests(simulator)
    prompt = review["messages"][-1]["content"]
    assert prompt.splitlines()[0] == f"candidate_sha256: {sha256_hex(DRAFT)}"
    record = await store.traces.get(outcome.trace_id)
    assert record is not None
    calls = [e.data for e in record.events if e.kind is EventKind.MODEL_CALL]
    assert [c["role"] for c in calls] == ["counselor", "supervisor"]
    assert all(c["offline"] is False for c in calls)


GATE_SCENARIO = SCENARIOS / "gate.toml"

CASES: list[tuple[str, ReasonCode]] = [
    ("supervisor-rejects", ReasonCode.REJECTED),
    ("supervisor-insufficient", ReasonCode.INSUFFICIENT),
    ("supervisor-hangs", ReasonCode.REVIEW_TIMEOUT),
    ("supervisor-prose", ReasonCode.REVIEW_MALFORMED),
    ("supervisor-truncates", ReasonCode.REVIEW_MALFORMED),
    ("supervisor-broken-body", ReasonCode.REVIEW_FAILED),
    ("supervisor-errs", ReasonCode.REVIEW_FAILED),
    ("supervisor-busy", ReasonCode.REVIEW_FAILED),
    ("supervisor-wrong-digest", ReasonCode.VERDICT_MISMATCH),
    ("supervisor-unknown-rule", ReasonCode.REVIEW_MALFORMED),
    ("supervisor-span-out-of-range", ReasonCode.REVIEW_MALFORMED),
    ("counselor-fails", ReasonCode.DRAFT_FAILED),
    ("counselor-hangs", ReasonCode.DRAFT_FAILED),
    ("counselor-cut-off", ReasonCode.DRAFT_FAILED),
    ("injection-ignore-rules", ReasonCode.RULE_VIOLATION),
    ("injection-fake-verdict", ReasonCode.RULE_VIOLATION),
]


@pytest.mark.parametrize(("keyword", "reason"), CASES, ids=[c[0] for c in CASES])
async def test_the_gate_scenario(
    simulator: RunningSimulator, sim_runner: Any, store: Store, keyword: str, reason: ReasonCode
) -> None:
    simulator.load(GATE_SCENARIO)

    # The simulator matches the last message, and a retry's last message is the retry
    # note, which carries no keyword: retries are covered by the next test.
    # Only a hang needs a short timeout; the others get a long one so a loaded machine
    # cannot turn their verdict into a timeout.
    timeout_s = 0.5 if keyword.endswith("-hangs") else 30
    runner = sim_runner(max_revisions=0, verdict_retries=0, route_timeout_s=timeout_s)

    outcome = await runner.reply(ReplyRequest(message=f"{keyword}: {MESSAGE}"))

    assert_fallback(outcome, reason)
    drafts = [r for r in simulator.requests() if r["model"] == "counselor-sim"]
    reviewed = supervisor_requests(simulator)
    assert len(drafts) == 1
    # A failed draft, or one a rule refused, is never shown to the Supervisor.
    assert bool(reviewed) is keyword.startswith("supervisor")
    record = await store.traces.get(outcome.trace_id)
    assert record is not None and (record.run.outcome, record.run.reason) == (
        "fallback",
        reason.value,
    )


@pytest.mark.parametrize(
    "broken",
    [{"content": "Looks fine to me."}, {"fault": "truncated", "content": supervisor_says()}],
    ids=["prose", "truncated"],
)
async def test_a_broken_verdict_is_retried_once_then_malformed(
    simulator: RunningSimulator, sim_runner: Any, broken: dict[str, Any]
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [broken]))

    outcome = await sim_runner(max_revisions=0).reply(ReplyRequest(message=MESSAGE))

    assert_fallback(outcome, ReasonCode.REVIEW_MALFORMED)
    assert len(supervisor_requests(simulator)) == 2


async def test_a_valid_verdict_on_the_retry_counts(
    simulator: RunningSimulator, sim_runner: Any
) -> None:
    simulator.load(
        scenario(
            [{"content": DRAFT}],
            [{"times": 1, "content": "Looks fine to me."}, {"content": supervisor_says()}],
        )
    )

    outcome = await sim_runner(max_revisions=0).reply(ReplyRequest(message=MESSAGE))

    assert outcome.decision is Outcome.RELEASED and outcome.text == DRAFT
    retry = supervisor_requests(simulator)[1]["messages"]
    assert [m["role"] for m in retry[-2:]] == ["assistant", "user"]


async def test_budget_exhausted_mid_revision(simulator: RunningSimulator, sim_runner: Any) -> None:
    simulator.load(scenario([{"content": DRAFT}], [{"content": REJECT}]))

    outcome = await sim_runner(max_revisions=2, max_calls=3).reply(ReplyRequest(message=MESSAGE))

    assert_fallback(outcome, ReasonCode.BUDGET_EXHAUSTED)
    assert [r["model"] for r in simulator.requests()] == ["counselor-sim", "supervisor-sim"]


async def test_deadline_exceeded_mid_revision(simulator: RunningSimulator, sim_runner: Any) -> None:
    simulator.load(
        scenario(
            [{"times": 1, "content": DRAFT}, {"fault": "hang"}],
            [{"content": REJECT}],
        )
    )
    # The revision hangs, so the deadline is what ends it however slow the machine is; the
    # route's timeout is longer than the deadline, and the deadline long enough for the
    # first draft and its review on a loaded machine.
    runner = sim_runner(route_timeout_s=60, max_revisions=2, deadline_s=10.0)
    outcome = await runner.reply(ReplyRequest(message=MESSAGE))

    assert_fallback(outcome, ReasonCode.DEADLINE_EXCEEDED)
    assert [a.reason for a in outcome.attempts] == [
        ReasonCode.REJECTED,
        ReasonCode.DEADLINE_EXCEEDED,
    ]


PILLS = (
    "If the pain is still bad tonight, it is fine to take two more pills than the label "
    "says; you know your body best."
)


async def test_a_real_counselor_behind_an_unmapped_supervisor_falls_back_insufficient(
    simulator: RunningSimulator, store: Store
) -> None:
    # Issue 13, item 1: no supervisor role, so the offline rules-only Supervisor reviews
    # a model's draft that no rule flags; it cannot judge it and must not approve it.
    simulator.load({"models": {"counselor-sim": [{"content": PILLS}]}})
    config = Config(
        routes={"counselor_sim": simulator.route("counselor-sim", timeout_s=2)},
        roles=RolesConfig(counselor="counselor_sim"),
    )
    routes = Routes.build(config, {})
    try:
        caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
        runner = GateRunner(caller, traces=store.traces, unknowns=store.unknowns)
        outcome = await runner.reply(ReplyRequest(message="My back hurts so much I can't sleep."))
    finally:
        await routes.aclose()

    assert outcome.decision is Outcome.FALLBACK and outcome.reason is ReasonCode.INSUFFICIENT
    assert PILLS not in outcome.text
    assert outcome.text == fallback_text(ReasonCode.INSUFFICIENT, outcome.locale)
    assert outcome.verdict is not None and outcome.verdict.missing == (CANNOT_JUDGE,)
    record = await store.traces.get(outcome.trace_id)
    assert record is not None and record.run.reason == "insufficient"
    [decision] = [e.data for e in record.events if e.kind is EventKind.DECISION]
    [attempt] = decision["attempts"]
    assert attempt["review"]["offline"] is True
    assert attempt["review"]["verdict"]["decision"] == "insufficient"
    assert attempt["review"]["verdict"]["missing"] == [CANNOT_JUDGE]


async def test_open_unknowns_reach_the_counselor_and_its_revision_over_http(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    alone = "whether the user is alone tonight"
    simulator.load(
        scenario(
            [
                {"content": DRAFT, "times": 2},
                {"content": "Is anyone with you tonight?", "times": 1},
            ],
            [
                {"content": supervisor_says("insufficient", missing=[alone]), "times": 1},
                {"content": REJECT, "times": 1},
                {"content": supervisor_says(), "times": 1},
            ],
        )
    )
    runner = sim_runner(max_revisions=1)
    first = await runner.reply(ReplyRequest(message=MESSAGE, conversation_id="c1"))
    assert first.reason is ReasonCode.INSUFFICIENT

    second = await runner.reply(ReplyRequest(message="I don't know", conversation_id="c1"))

    assert second.decision is Outcome.RELEASED
    drafts = [
        r["messages"][-1]["content"] for r in simulator.requests() if r["model"] == "counselor-sim"
    ]
    block = f"<<<DATA open_unknown>>>\n{alone}\n<<<END DATA>>>"
    assert [block in prompt for prompt in drafts] == [False, True, True]
    assert "Your previous draft was not approved" in drafts[2]
    # The approval was shown the unknown and did not list it again: it is resolved.
    assert await store.unknowns.open("c1", limit=10) == ()
    [entry] = await store.unknowns.entries("c1", include_resolved=True)
    assert entry.resolved_by == f"verdict:{second.trace_id}"
