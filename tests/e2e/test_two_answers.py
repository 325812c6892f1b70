"""An answer that says two things is no answer: a verdict and an assessment, every transport.

A real uvicorn on loopback in guard mode and ``foureyes simulate`` for every model, with
each ``openai`` transport. The Supervisor writes an ``approve`` and then a ``reject`` (or
the reverse): the draft must fall back with ``review_malformed``, nothing of it
delivered, after the one retry the contract allows. L1 writes a ``low`` and then a
``critical`` assessment: the assessment must fail with ``several_objects`` recorded, never
be read as either one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from foureyes.config import Config
from tests.e2e.test_fault_matrix import TRANSPORTS
from tests.e2e.test_guard_mode import client_of, config, messages, sent_to
from tests.helpers.answers import APPROVE, REJECT, answer
from tests.helpers.server import RunningServer
from tests.helpers.simulator import RunningSimulator

Start = Callable[..., RunningServer]

DRAFT = "That sounds like a hard week. What would help most right now?"


def _on(transport: str, cfg: Config) -> Config:
    routes = {
        name: route.model_copy(update={"transport": transport})
        for name, route in cfg.routes.items()
    }
    return cfg.model_copy(update={"routes": routes})


def _scenario(supervisor: str, l1: str) -> dict[str, Any]:
    return {
        "models": {
            "team-sim": [{"content": DRAFT}],
            "supervisor-sim": [{"content": supervisor}],
            "l1-sim": [{"content": l1}],
            "l2-sim": [{"content": answer("critical", 0.95)}],
        }
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    "verdicts", [(APPROVE, REJECT), (REJECT, APPROVE)], ids=["approve-reject", "reject-approve"]
)
def test_a_verdict_that_says_two_things_is_malformed_on_every_transport(
    simulator: RunningSimulator,
    start_server: Start,
    tmp_path: Path,
    transport: str,
    verdicts: tuple[str, str],
) -> None:
    simulator.load(_scenario("\n".join(verdicts), answer("low", 0.9)))
    server = start_server(_on(transport, config(simulator, tmp_path)))
    reply = client_of(server).chat.completions.create(
        model="foureyes-support",
        messages=messages("Work has been a lot this week."),  # type: ignore[arg-type]
    )
    block = reply.model_extra["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "review_malformed")
    assert reply.choices[0].message.content != DRAFT
    assert len(sent_to(simulator, "supervisor")) == 2  # the answer, and its one retry


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_assessment_that_says_two_things_is_a_failed_assessment(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path, transport: str
) -> None:
    two = answer("low", 0.9) + "\n" + answer("critical", 0.97)
    simulator.load(_scenario(APPROVE, two))
    server = start_server(_on(transport, config(simulator, tmp_path)))
    reply = client_of(server).chat.completions.create(
        model="foureyes-support",
        messages=messages("I want to die, I have the pills ready."),  # type: ignore[arg-type]
    )
    block = reply.model_extra["foureyes"]
    trace = httpx.get(f"{server.url}/v1/traces/{block['trace_id']}", timeout=30).json()
    failures = [
        event["data"].get("parse_failure")
        for event in trace["events"]
        if event.get("stage") == "l1"
    ]
    assert "several_objects" in failures, trace["events"]
    # Never read as its 'low': a message L0 escalated stays away from a normal reply.
    assert block["policy"] != "normal"
    assert reply.choices[0].message.content != DRAFT
