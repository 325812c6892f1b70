"""The message classes issue 14 found cleared by L0 reach the crisis models through the gateway.

With crisis models that answer ``critical`` to everything (tests/fixtures/scenarios/
critical_l1.toml), what comes back shows which messages the screen sends to a model: under
the default ``l1_policy`` these were ``low``, tier L0, policy ``normal`` and a normal reply
before the screen combined its signals. Each now goes to L1 and L2, is confirmed, and gets
the code-rendered crisis reply with the resources of its language. L1 reads every message
now (``l1_policy = "every"``), so what shows that L0 itself escalated a message is that no
Counselor saw it before triage: a calm message, which L0 does not escalate, is drafted at
once while L1 reads it, so the test would fail if the screen simply escalated everything.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from foureyes.core.locale import detect_locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import fallback_text
from foureyes.gate.release import PART_SEPARATOR
from foureyes.risk.resources import render_resources
from tests.helpers.server import RunningServer
from tests.helpers.simulator import SCENARIOS, RunningSimulator

SCENARIO = SCENARIOS / "critical_l1.toml"

# The five message classes, as a user would write them.
CLASSES = [
    "I took all my pills an hour ago.",
    "I wrote goodbye letters to my family tonight.",
    "我已经把药都吃了",
    "活着没意思",
    "I just want to disappear forever.",
]
CALM = "I had a rough day at work and I can't sleep."


@pytest.fixture
def client(
    simulator: RunningSimulator, start_server: Callable[..., RunningServer], tmp_path: Path
) -> openai.OpenAI:
    simulator.load(SCENARIO)
    # Every setting at its default (l1_policy too); every role on the simulator.
    server = start_server(simulator.config(f"sqlite+aiosqlite:///{tmp_path / 'classes.db'}"))
    return openai.OpenAI(base_url=server.base_url, api_key="unused-locally", max_retries=0)


def ask(client: openai.OpenAI, text: str, conversation: str) -> tuple[str, dict[str, Any]]:
    reply = client.chat.completions.create(
        model="foureyes-support",
        messages=[{"role": "user", "content": text}],
        user=conversation,
    )
    return reply.choices[0].message.content, reply.model_extra["foureyes"]


@pytest.mark.parametrize("text", CLASSES)
def test_the_message_reaches_the_crisis_models_and_gets_resources(
    text: str, client: openai.OpenAI, simulator: RunningSimulator
) -> None:
    content, block = ask(client, text, "conv-class")

    assert block["risk"] == {"status": "ok", "level": "critical", "confirmed": True, "tier": "L2"}
    assert block["policy"] == "prohibited"
    locale = detect_locale(text)
    crisis = fallback_text(ReasonCode.GENERATION_PROHIBITED, locale)
    assert content == crisis + PART_SEPARATOR + render_resources(locale, None)
    asked = [request["model"] for request in simulator.requests()]
    assert "l1-sim" in asked and "l2-sim" in asked
    # Sent to the crisis models before any draft: the Counselor never saw the message.
    assert "counselor-sim" not in asked


def test_a_calm_message_is_drafted_at_once_while_l1_reads_it(
    client: openai.OpenAI, simulator: RunningSimulator
) -> None:
    content, block = ask(client, CALM, "conv-calm")

    # These crisis models find everything critical: the speculative draft is discarded.
    assert block["risk"]["tier"] == "L2" and block["policy"] == "prohibited"
    asked = [request["model"] for request in simulator.requests()]
    # L0 did not escalate it: the Counselor was asked before triage had finished.
    assert asked.index("counselor-sim") < asked.index("l2-sim")
