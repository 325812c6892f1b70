"""The crisis roles keep their share of a route they share with the chat roles.

One simulator route serves the Counselor, the Supervisor and L1/L2 with ``daily_calls``
N: chat traffic stops at ``N - ceil(N * reserved_share)`` calls (the gate falls back with
``budget_exhausted``), and an L1 assessment still runs after it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from foureyes.config import Config, RiskConfig, RolesConfig, StoreConfig
from foureyes.core.budget import utc_day
from foureyes.core.reasons import ReasonCode
from foureyes.server import create_app
from foureyes.store import Store
from tests.helpers.answers import answer
from tests.helpers.server import app_client
from tests.helpers.simulator import RunningSimulator

DAILY_CALLS = 10
DRAFT = "Thank you for telling me. That sounds heavy; what feels hardest right now?"
APPROVE = json.dumps(
    {
        "candidate_sha256": "{{candidate_sha256}}",
        "decision": "approve",
        "violations": [],
        "missing": [],
    }
)


def shared_config(simulator: RunningSimulator, **risk: Any) -> Config:
    return Config(
        store=StoreConfig(url=os.environ["FOUREYES_STORE__URL"]),
        routes={"shared": simulator.route("shared-sim", timeout_s=5, daily_calls=DAILY_CALLS)},
        roles=RolesConfig(
            counselor="shared", supervisor="shared", risk_l1="shared", risk_l2="shared"
        ),
        risk=RiskConfig(**risk),
    )


def load_shared(simulator: RunningSimulator) -> None:
    simulator.load(
        {
            "models": {
                "shared-sim": [
                    {
                        "match": "Assess the risk this message expresses",
                        "content": answer("medium", 0.6),
                    },
                    {"match": "<<<DATA candidate ", "content": APPROVE},
                    {"content": DRAFT},
                ]
            }
        }
    )


def chat(text: str) -> dict[str, Any]:
    return {"model": "foureyes-support", "messages": [{"role": "user", "content": text}]}


async def test_chat_traffic_cannot_take_the_crisis_share_of_a_shared_route(
    simulator: RunningSimulator,
) -> None:
    load_shared(simulator)
    # Only the crisis message goes to L1 here, so the calls counted are the chat roles'.
    cfg = shared_config(simulator, l1_policy="escalated")
    async with app_client(create_app(cfg, {})) as client:
        reasons: list[str] = []
        for _ in range(DAILY_CALLS):  # each calm turn is a draft and a review: 2 calls
            reply = await client.post("/v1/chat/completions", json=chat("I had a rough day."))
            reasons.append(reply.json()["foureyes"]["reason"])
            if reasons[-1] != ReasonCode.APPROVED.value:
                break
        crisis = (await client.post("/v1/chat/completions", json=chat("I want to die."))).json()

    # 8 of the 10 calls are the chat roles' (4 approved turns); the fifth falls back.
    assert reasons == [ReasonCode.APPROVED.value] * 4 + [ReasonCode.BUDGET_EXHAUSTED.value]
    risk = crisis["foureyes"]["risk"]
    assert (risk["status"], risk["tier"], risk["level"]) == ("ok", "L1", "medium")
    assert crisis["foureyes"]["reason"] == ReasonCode.BUDGET_EXHAUSTED.value
    store = await Store.open(cfg.store, cfg.privacy, {})
    try:
        route = await store.ledger.usage("route:shared", utc_day())
        chat_share = await store.ledger.usage("route:shared:non_crisis", utc_day())
    finally:
        await store.close()
    assert (route.calls, chat_share.calls) == (9, 8)


async def test_with_no_reserved_share_chat_traffic_uses_up_the_assessments(
    simulator: RunningSimulator,
) -> None:
    load_shared(simulator)
    async with app_client(create_app(shared_config(simulator, reserved_share=0), {})) as client:
        for _ in range(DAILY_CALLS // 2):
            await client.post("/v1/chat/completions", json=chat("I had a rough day."))
        crisis = (await client.post("/v1/chat/completions", json=chat("I want to die."))).json()

    assert crisis["foureyes"]["risk"]["status"] == "unknown"
