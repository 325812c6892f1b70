"""A model reads every message, and a conversation in crisis stays in crisis.

A real uvicorn on loopback, the official ``openai`` SDK, ``foureyes simulate`` for every
model and a real SQLite file. L1 and L2 are scripted by message: a word of the script
(``critical:``, ``flagged:``, ...) picks the assessment, so each case says what the model
would have found, and what the gateway does with it is what is tested.

- ``[risk] l1_policy = "every"`` (the default): a message L0 does not escalate still
  reaches L1 (while the Counselor drafts), and L1's finding sets the reply: a message of a
  class L0 misses gets the restricted reply with resources, or the crisis reply.
- After an escalated turn the conversation is in crisis (its store records, or an
  escalated user turn in the history the client sends): each later message goes to L1
  with the turns before it, and no reply is less than ``restricted`` until L1, having read
  the conversation, says ``low`` with no context flag. The state survives a restart and
  is the tenant's own.
- Past a daily L1 limit, a message L0 clears is ``l0_only``, never silently ``ok``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from foureyes.config import Config, RiskConfig, ServerConfig
from foureyes.gate.release import PART_SEPARATOR
from foureyes.server import create_app
from tests.helpers.answers import APPROVE, answer
from tests.helpers.server import RunningServer, serve_app
from tests.helpers.simulator import RunningSimulator

DRAFT = "That sounds like a lot to carry. What would help most tonight?"
CRISIS = "I want to die, I have the pills ready."
# One message of each class the issue names L0 as missing (L0 may catch some now; a model
# reads each either way). What the model makes of them is scripted by the word before
# the colon.
MISSED = [
    "critical: the bottle is empty now and I feel calm",  # an act in progress
    "critical: standing on the roof of my building, the wind is nice",  # imminent means
    "critical: bought the rope today, it is in my car",  # preparatory acts
    "critical: I gave my guitar to my brother and wrote to everyone I love",  # farewells
    "high: everyone would be lighter if I was not around to weigh them down",  # burden
    "high: there is no door out of this for me anymore",  # entrapment
    "high: some nights I hope I just do not wake up",  # implicit ideation
    "high: the cuts on my arm are getting deeper",  # self-harm
    "critical: 药已经吃下去了，现在很平静",  # an act in progress (zh-Hans)
    "high: 我把猫送给了朋友，东西也都分好了",  # preparatory acts (zh-Hans)
    "high: 大家沒有我會過得更好",  # burden (zh-Hant)
]
KEY_A = "every-a-key-" + "a" * 20
KEY_B = "every-b-key-" + "b" * 20
ENV = {"CLIENT_KEYS": f"{KEY_A},{KEY_B}"}


def _current(words: str) -> str:
    """A match on the current message only (the earlier turns a prompt shows are not it)."""
    return rf"(?:user|current)_message>>>\s*(?:{words})"


def _scripted() -> dict[str, Any]:
    levels = [
        ("critical:|I want to die", answer("critical", 0.97)),
        ("high:", answer("high", 0.9)),
        ("flagged:", answer("low", 0.9, flags=["joke"])),
        ("medium:", answer("medium", 0.8)),
    ]
    l1 = [{"match": _current(words), "content": text} for words, text in levels]
    l1.append({"content": answer("low", 0.9)})
    l2 = [{"match": _current("critical:|I want to die"), "content": answer("critical", 0.95)}]
    l2.append({"content": answer("high", 0.9)})
    return {
        "models": {
            "counselor-sim": [{"content": DRAFT}],
            "supervisor-sim": [{"content": APPROVE}],
            "l1-sim": l1,
            "l2-sim": l2,
        }
    }


def _config(simulator: RunningSimulator, db: Path, **risk: Any) -> Config:
    base = simulator.config(f"sqlite+aiosqlite:///{db}", timeout_s=15)
    return base.model_copy(
        update={
            "risk": RiskConfig(**risk),
            "server": ServerConfig(api_keys_env="CLIENT_KEYS"),
        }
    )


@pytest.fixture
def serve(simulator: RunningSimulator, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``serve(**risk)``: a context manager serving the app on the test's one SQLite file."""
    simulator.load(_scripted())

    def start(**risk: Any) -> Any:
        return serve_app(create_app(_config(simulator, tmp_path / "every.db", **risk), ENV))

    yield start


def _ask(
    server: RunningServer,
    text: str,
    *,
    conversation: str | None = "c-1",
    key: str = KEY_A,
    history: list[dict[str, str]] | None = None,
) -> tuple[str, dict[str, Any]]:
    client = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0)
    options = {} if conversation is None else {"user": conversation}
    reply = client.chat.completions.create(
        model="foureyes-support",
        messages=[*(history or []), {"role": "user", "content": text}],  # type: ignore[list-item]
        **options,
    )
    return reply.choices[0].message.content or "", reply.model_extra["foureyes"]


def _l1_prompts(simulator: RunningSimulator) -> list[str]:
    return [
        json.dumps(r["messages"][-1]["content"])
        for r in simulator.requests()
        if r["model"] == "l1-sim"
    ]


def test_a_calm_message_is_read_by_l1_and_answered_normally(
    serve: Callable[..., Any], simulator: RunningSimulator
) -> None:
    with serve() as server:
        content, block = _ask(server, "I had a long day at work.")
    assert (block["risk"]["tier"], block["risk"]["level"], block["policy"]) == (
        "L1",
        "low",
        "normal",
    )
    assert content == DRAFT and PART_SEPARATOR not in content
    assert len(_l1_prompts(simulator)) == 1


@pytest.mark.parametrize("text", MISSED)
def test_a_message_l0_misses_reaches_l1_and_gets_resources(
    serve: Callable[..., Any], simulator: RunningSimulator, text: str
) -> None:
    with serve() as server:
        content, block = _ask(server, text, conversation=None)
    assert block["risk"]["tier"] == "L2" and block["policy"] in ("restricted", "prohibited")
    assert PART_SEPARATOR in content and DRAFT not in content.split(PART_SEPARATOR)[1:]
    assert len(_l1_prompts(simulator)) == 1


def test_under_escalated_the_same_message_stops_at_l0(
    serve: Callable[..., Any], simulator: RunningSimulator
) -> None:
    # The control: the old default would answer it normally, without any model reading it.
    with serve(l1_policy="escalated") as server:
        content, block = _ask(server, MISSED[0], conversation=None)
    assert (block["risk"]["tier"], block["policy"]) == ("L0", "normal")
    assert content == DRAFT and _l1_prompts(simulator) == []


@pytest.mark.parametrize("policy", ["every", "escalated"])
def test_after_a_confirmed_crisis_the_next_turns_stay_in_crisis_until_l1_clears_them(
    serve: Callable[..., Any], simulator: RunningSimulator, policy: str
) -> None:
    with serve(l1_policy=policy) as server:
        _, first = _ask(server, CRISIS)
        assert first["risk"]["confirmed"] is True and first["policy"] == "prohibited"
        # L1 finds the next message low but flagged (a joke?): that does not end a crisis.
        earlier = [
            {"role": "user", "content": "I had a plan for tonight."},
            {"role": "assistant", "content": "I am here with you."},
        ]
        content, second = _ask(server, "flagged: it is done, haha", history=earlier)
        assert second["risk"]["tier"] == "L1" and second["policy"] == "restricted"
        assert PART_SEPARATOR in content  # the resources are on screen
        # L1 read the message with the turns the client sent before it.
        assert "Earlier turns" in _l1_prompts(simulator)[-1]
        assert "I had a plan for tonight." in _l1_prompts(simulator)[-1]
        # Still in crisis: a message no model is asked about under "escalated" is read.
        content, third = _ask(server, "thanks for listening")
        assert (third["risk"]["tier"], third["risk"]["level"]) == ("L1", "low")
        # L1 read the conversation and found it low, unflagged: the crisis is over.
        assert third["policy"] == "normal" and content == DRAFT
        _, fourth = _ask(server, "and what about tomorrow")
    expected_tier = "L1" if policy == "every" else "L0"
    assert (fourth["risk"]["tier"], fourth["policy"]) == (expected_tier, "normal")


def test_an_l0_escalation_that_l1_finds_low_starts_no_crisis(
    serve: Callable[..., Any], simulator: RunningSimulator
) -> None:
    with serve(l1_policy="escalated") as server:
        _, first = _ask(server, "my boss makes me want to die of boredom")
        _, second = _ask(server, "and what about tomorrow")
    assert first["risk"]["tier"] == "L1" and first["risk"]["level"] == "low"
    assert (second["risk"]["tier"], second["policy"]) == ("L0", "normal")


def test_the_crisis_state_survives_a_restart_and_is_the_tenant_s_own(
    serve: Callable[..., Any], simulator: RunningSimulator
) -> None:
    with serve(l1_policy="escalated") as server:
        _ask(server, CRISIS, conversation="shared-id")
    with serve(l1_policy="escalated") as server:  # a new process state, the same store
        content, again = _ask(server, "medium: I am still here", conversation="shared-id")
        _, other = _ask(server, "medium: I am still here", conversation="shared-id", key=KEY_B)
    # The same conversation id under another key is another conversation: not in crisis,
    # and under "escalated" no model reads a message L0 clears.
    assert (other["risk"]["tier"], other["policy"]) == ("L0", "normal")
    assert (again["risk"]["tier"], again["policy"]) == ("L1", "restricted")
    assert PART_SEPARATOR in content


def test_an_escalated_turn_in_the_history_the_client_sends_counts(
    serve: Callable[..., Any], simulator: RunningSimulator
) -> None:
    history = [
        {"role": "user", "content": CRISIS},
        {"role": "assistant", "content": "I am here with you."},
    ]
    with serve(l1_policy="escalated") as server:
        # A conversation this store has never seen: only the client's history says it.
        content, block = _ask(server, "medium: ok", conversation=None, history=history)
    assert (block["risk"]["tier"], block["policy"]) == ("L1", "restricted")
    assert PART_SEPARATOR in content
    asked = [r["model"] for r in simulator.requests()]
    # Held back like any escalated message: no Counselor before triage set the policy.
    assert asked.index("counselor-sim") > asked.index("l1-sim")


def test_past_the_daily_limit_a_message_l0_clears_is_l0_only_not_ok(
    serve: Callable[..., Any], simulator: RunningSimulator
) -> None:
    with serve(l1_daily_limit=1) as server:
        _, first = _ask(server, "I had a long day at work.")
        content, second = _ask(server, "I made pasta for dinner.")
        _, crisis = _ask(server, CRISIS)
    assert first["risk"]["status"] == "ok" and first["risk"]["tier"] == "L1"
    assert (second["risk"]["status"], second["risk"]["level"], second["policy"]) == (
        "l0_only",
        "low",
        "normal",
    )
    assert content == DRAFT
    # A message L0 escalates past the limit is unknown, and restricted, as before.
    assert (crisis["risk"]["status"], crisis["policy"]) == ("unknown", "restricted")
    assert len(_l1_prompts(simulator)) == 1
