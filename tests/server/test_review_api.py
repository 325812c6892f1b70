"""``POST /v1/review`` on a tiny app with only the review router, over real parts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from foureyes.config import Config, ReviewConfig
from foureyes.review.importers import load_session
from foureyes.review.publication import PublicationPolicy
from foureyes.review.reviewer import Reviewer
from foureyes.review.runner import ReviewRunner
from foureyes.server.review_api import review_router
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import (
    SESSION_FILES,
    open_caller,
    opened_store,
    packet,
    scenario,
    sim_config,
)

REASONING = "secret plan: blame the fixture"
MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing test."},
    {
        "role": "assistant",
        "content": "Running the tests.",
        "reasoning_content": REASONING,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "1 failed: test_parse"},
]

MakeClient = Callable[..., Any]


@pytest.fixture
async def make_client(tmp_path: Path) -> AsyncIterator[MakeClient]:
    """A client of an app that mounts only the review router, over a real store and routes."""
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(opened_store(tmp_path))

        async def make(config: Config, **options: Any) -> httpx.AsyncClient:
            caller = await stack.enter_async_context(open_caller(config, store))
            runner = ReviewRunner(caller, packet_max_chars=config.review.packet_max_chars)
            reviewer = Reviewer(runner, config.review, **options)
            app = FastAPI()
            app.include_router(review_router(lambda request: reviewer))
            transport = httpx.ASGITransport(app=app)
            client = httpx.AsyncClient(transport=transport, base_url="http://test")
            return await stack.enter_async_context(client)

        yield make


async def test_review_of_openai_messages(
    simulator: RunningSimulator, make_client: MakeClient
) -> None:
    simulator.load(scenario({"content": packet("the test itself may be wrong")}))
    client = await make_client(sim_config(simulator))
    response = await client.post(
        "/v1/review", json={"messages": MESSAGES, "window": "current-turn", "session_id": "abc"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] and body["accepted"] and body["skipped"] is None
    assert body["projection"]["mask"] == "reasoning-only"
    assert body["outcome"]["packet"]["items"][0]["content"] == "the test itself may be wrong"
    assert body["publication"]["source"] == "plugin"
    (sent,) = simulator.requests()
    assert REASONING not in json.dumps(sent) and "1 failed: test_parse" in json.dumps(sent)


@pytest.mark.usefixtures("third_party_data")
async def test_review_of_native_events(
    simulator: RunningSimulator, make_client: MakeClient
) -> None:
    simulator.load(scenario({"content": packet()}))
    client = await make_client(sim_config(simulator), policy=PublicationPolicy.ALL)
    session = load_session(SESSION_FILES[0])
    events = [json.loads(line) for line in session.to_jsonl().splitlines()[1:]]
    response = await client.post(
        "/v1/review",
        json={"events": events, "system": list(session.system), "mask": "action-only",
              "mode": "reviewer-persona", "window": "recent:2"},
    )  # fmt: skip
    body = response.json()
    assert response.status_code == 200 and body["accepted"], body
    assert body["outcome"]["packet"] == {"role": "masked-review", "status": "no_update"}
    assert body["publication"] is not None  # policy "all" publishes no_update too
    assert body["request"]["mode"] == "reviewer-persona"


async def test_project_only_calls_no_model(
    simulator: RunningSimulator, make_client: MakeClient
) -> None:
    client = await make_client(sim_config(simulator))
    response = await client.post(
        "/v1/review", json={"messages": MESSAGES, "window": "recent:1", "project_only": True}
    )
    body = response.json()
    assert response.status_code == 200 and body["skipped"] is None
    assert body["projection"]["omitted_reasoning_blocks"] == 1
    assert REASONING not in json.dumps(body)
    assert simulator.requests() == []


@pytest.mark.parametrize("window", ["since-last-mutation", "all-turns", " recent:1 "])
async def test_every_window_kind_is_accepted(
    simulator: RunningSimulator, make_client: MakeClient, window: str
) -> None:
    client = await make_client(sim_config(simulator))
    response = await client.post(
        "/v1/review", json={"messages": MESSAGES, "window": window, "project_only": True}
    )
    body = response.json()
    assert response.status_code == 200 and body["skipped"] is None, body
    assert body["projection"]["window"] == window.strip()
    assert body["projection"]["effective_k"] == 1


async def test_a_skip_and_a_reviewer_fault_are_results(
    simulator: RunningSimulator, make_client: MakeClient
) -> None:
    simulator.load(scenario({"fault": "http_500"}))
    config = sim_config(simulator).model_copy(update={"review": ReviewConfig()})
    client = await make_client(config)
    failed = (await client.post("/v1/review", json={"messages": MESSAGES})).json()
    assert failed["accepted"] is False and failed["outcome"]["reason"] == "review_failed"
    assert failed["publication"] is None
    done = [*MESSAGES, {"role": "assistant", "content": "Fixed."}]
    skipped = await client.post("/v1/review", json={"messages": done, "window": "current-turn"})
    assert skipped.status_code == 200 and skipped.json()["skipped"] == "no_open_turn"
    assert len(simulator.requests()) == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        *(
            ("/v1/review", body)
            for body in (
                {},
                {"messages": MESSAGES, "events": []},
                {"messages": MESSAGES, "window": "recent:0"},
                {"messages": MESSAGES, "window": "all-turns:2"},
                {"messages": MESSAGES, "window": "since_last_mutation"},
                {"messages": MESSAGES, "mask": "everything"},
                {"messages": MESSAGES, "system": ["x"]},
                {"messages": MESSAGES, "surprise": 1},
                {"messages": [{"role": "robot", "content": "hi"}]},
                {"events": [{"type": "step_end", "step_id": "s9"}]},
                {"events": [{"type": "no_such_event"}]},
            )
        ),
        # The deliberate sibling reads the session the same way and needs its arguments.
        ("/v1/review/deliberate", {"messages": MESSAGES}),
        ("/v1/review/deliberate", {"arguments": "{}"}),
        ("/v1/review/deliberate", {"messages": MESSAGES, "arguments": "{}", "mask": "none"}),
        ("/v1/review/deliberate", {"events": [{"type": "no_such_event"}], "arguments": "{}"}),
    ],
)
async def test_a_body_that_is_not_a_session_is_422(
    simulator: RunningSimulator, make_client: MakeClient, path: str, body: dict[str, Any]
) -> None:
    client = await make_client(sim_config(simulator))
    response = await client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert simulator.requests() == []


# --- POST /v1/review/deliberate ---------------------------------------------------------

CALL = {"id": "d1", "type": "function", "function": {"name": "deliberate", "arguments": "{}"}}
ASKING = [
    *MESSAGES,
    {"role": "assistant", "content": None, "reasoning_content": "now sure", "tool_calls": [CALL]},
]


async def test_deliberate_answers_the_tool_result_for_the_agent_to_read(
    simulator: RunningSimulator, make_client: MakeClient
) -> None:
    simulator.load(scenario({"content": packet("the test itself may be wrong")}))
    # updates-only does not hold back the packet the agent asked for.
    client = await make_client(sim_config(simulator), policy=PublicationPolicy.UPDATES_ONLY)
    arguments = '{"role": "trajectory-audit", "recentSteps": 1}'
    answered = (
        await client.post(
            "/v1/review/deliberate",
            json={"messages": ASKING, "arguments": arguments, "session_id": "agent"},
        )
    ).json()
    refused = await client.post(
        "/v1/review/deliberate", json={"messages": ASKING, "arguments": '{"role": "oracle"}'}
    )
    assert answered["ok"] and (answered["status"], answered["reason"]) == ("packet", "accepted")
    # The audit is the full unmasked fork of the whole session, whatever recentSteps says.
    assert (answered["role"], answered["window"], answered["error"]) == (
        "trajectory-audit",
        "all-turns",
        False,
    )
    head, shown = answered["content"].split("\n", 1)
    assert json.loads(head)["masked_steps"] == 1 and "the test itself may be wrong" in shown
    assert answered["review"]["projection"]["mask"] == "none"
    assert refused.status_code == 200
    assert refused.json() | {"content": None} == {
        "ok": True,
        "status": "refused",
        "reason": "unknown_role",
        "error": True,
        "content": None,
        "role": None,
        "window": None,
        "review": None,
    }
    (sent,) = simulator.requests()
    wire = json.dumps(sent["messages"])
    assert REASONING in wire and "Running the tests." in wire and "1 failed: test_parse" in wire
    assert "now sure" not in wire  # the calling step is in flight
