"""End to end: the support pipeline over real HTTP, against ``foureyes simulate``.

Every role is a model of the session's simulator, reached through the ``openai`` route
kind; the store is a real SQLite file. The simulator's request log shows which endpoint
was asked what, in the order the requests arrived.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from foureyes.config import Config, RolesConfig
from foureyes.core.reasons import ReasonCode
from foureyes.core.trace import EventKind
from foureyes.gate import Outcome
from foureyes.llm.routes import Routes
from foureyes.pipeline import SupportMessage, SupportPipeline
from foureyes.store import Store
from tests.helpers.simulator import RunningSimulator
from tests.pipeline._support import assessment
from tests.pipeline.conftest import _L0

DRAFT = "Thank you for telling me. That sounds heavy; what feels hardest right now?"
CALM = "I had a rough day at work and I can't sleep."
CRISIS = "I want to die, I have the pills ready."
APPROVE = json.dumps(
    {"candidate_sha256": "{{candidate_sha256}}", "decision": "approve", "violations": []}
)
MODELS = {
    "counselor": "counselor-sim",
    "supervisor": "supervisor-sim",
    "risk_l1": "l1-sim",
    "risk_l2": "l2-sim",
}

MakePipeline = Callable[..., SupportPipeline]


@pytest.fixture
async def sim_pipeline(simulator: RunningSimulator, store: Store) -> AsyncIterator[MakePipeline]:
    """Pipelines whose every role is a simulator model; their routes are closed after."""
    built: list[tuple[SupportPipeline, Routes]] = []

    def make(*, speculative_draft: bool = True, **risk: Any) -> SupportPipeline:
        config = Config(
            routes={role: simulator.route(model, timeout_s=5) for role, model in MODELS.items()},
            roles=RolesConfig(**{role: role for role in MODELS}),
            gate={"speculative_draft": speculative_draft},  # type: ignore[arg-type]
            risk=risk,  # type: ignore[arg-type]
        )
        routes = Routes.build(config, {})
        pipeline = SupportPipeline(config, routes, store, l0=_L0)
        built.append((pipeline, routes))
        return pipeline

    yield make
    for pipeline, routes in built:
        await pipeline.aclose()
        await routes.aclose()


def scenario(l1: dict[str, Any], l2: dict[str, Any]) -> dict[str, Any]:
    return {
        "models": {
            "counselor-sim": [{"content": DRAFT}],
            "supervisor-sim": [{"content": APPROVE}],
            # The assessors answer late: a draft started with the message would arrive
            # while they are still thinking.
            "l1-sim": [{"fault": "delay", "delay_s": 0.3, **l1}],
            "l2-sim": [{"fault": "delay", "delay_s": 0.3, **l2}],
        }
    }


def arrivals(simulator: RunningSimulator) -> list[str]:
    """The models asked, in the order their requests arrived."""
    return [r["model"] for r in sorted(simulator.requests(), key=lambda r: r["seq"])]


async def test_a_message_l0_escalates_reaches_the_counselor_only_after_triage(
    simulator: RunningSimulator, sim_pipeline: MakePipeline
) -> None:
    # L2 is not confident enough to confirm: restricted, so a draft is wanted, but only
    # once triage has said so.
    simulator.load(
        scenario(
            {"content": assessment("critical", 0.97)}, {"content": assessment("critical", 0.6)}
        )
    )

    outcome = await sim_pipeline().handle(SupportMessage(text=CRISIS, conversation_id="c1"))

    assert outcome.decision is Outcome.RELEASED and not outcome.triage.confirmed
    assert not outcome.speculative
    assert arrivals(simulator) == ["l1-sim", "l2-sim", "counselor-sim", "supervisor-sim"]


async def test_a_prohibited_message_never_reaches_the_counselor(
    simulator: RunningSimulator, sim_pipeline: MakePipeline
) -> None:
    simulator.load(
        scenario(
            {"content": assessment("critical", 0.97)}, {"content": assessment("critical", 0.93)}
        )
    )

    outcome = await sim_pipeline().handle(SupportMessage(text=CRISIS, conversation_id="c1"))

    assert (outcome.decision, outcome.reason) == (
        Outcome.FALLBACK,
        ReasonCode.GENERATION_PROHIBITED,
    )
    assert outcome.triage.confirmed
    assert arrivals(simulator) == ["l1-sim", "l2-sim"]


@pytest.mark.parametrize(
    ("risk", "tier", "asked"),
    [
        ({}, "L1", ["counselor-sim", "l1-sim", "supervisor-sim"]),
        ({"l1_policy": "escalated"}, "L0", ["counselor-sim", "supervisor-sim"]),
    ],
    ids=["every-message-read", "escalated-only"],
)
async def test_a_message_l0_lets_through_is_drafted_at_once(
    simulator: RunningSimulator,
    sim_pipeline: MakePipeline,
    store: Store,
    risk: dict[str, Any],
    tier: str,
    asked: list[str],
) -> None:
    simulator.load(scenario({"content": assessment("low")}, {"content": assessment("low")}))

    outcome = await sim_pipeline(**risk).handle(SupportMessage(text=CALM, conversation_id="c1"))

    assert outcome.decision is Outcome.RELEASED and outcome.text == DRAFT
    # By default L1 reads it while the Counselor drafts (no latency added); it found low.
    assert outcome.speculative and outcome.triage.tier.value == tier
    assert sorted(arrivals(simulator)) == asked
    assert outcome.triage.policy.value == "normal"
    record = await store.traces.get(outcome.trace_id)
    assert record is not None
    [gate] = [e.data for e in record.events if e.kind is EventKind.DECISION]
    assert gate["context"]["speculative_draft"] == {"state": "used"}


@pytest.mark.parametrize(
    ("text", "risk"),
    [
        (CALM, {"l1_policy": "always"}),
        ("Quiero morir", {}),
    ],
    ids=["always", "unscreened"],
)
async def test_a_message_sent_to_l1_by_policy_or_language_is_not_drafted_speculatively(
    text: str, risk: dict[str, Any], simulator: RunningSimulator, sim_pipeline: MakePipeline
) -> None:
    simulator.load(scenario({"content": assessment("low")}, {"content": assessment("low")}))

    outcome = await sim_pipeline(**risk).handle(SupportMessage(text=text, conversation_id="c1"))

    assert not outcome.triage.l0.escalate and outcome.triage.tier.value == "L1"
    assert not outcome.speculative
    assert arrivals(simulator) == ["l1-sim", "counselor-sim", "supervisor-sim"]
