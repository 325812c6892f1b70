"""The host API: manual reviews and the automatic checkpoint, over the real simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from foureyes.config import Config, ReviewConfig, RouteConfig
from foureyes.core.budget import CallBudget
from foureyes.core.trace import EventKind
from foureyes.review.projection import Mask, SkipReason, Window
from foureyes.review.publication import CheckpointLatch, CheckpointSkip, PublicationPolicy
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, project_session, projection_json
from foureyes.review.runner import ReviewReason, ReviewRunner
from foureyes.review.session import (
    AssistantMessage,
    EndReason,
    ImageBlock,
    MessageSource,
    ReasoningBlock,
    Session,
    StepEnd,
    StepStart,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import open_caller, opened_store, packet, scenario, sim_config

REASONING = "I suspect the fixture itself is wrong, not the code."


def tool_turn(turn: str = "t1", step: str = "s1", call: str = "c1") -> list[object]:
    return [
        TurnStart(turn_id=turn),
        UserMessage(content="Fix the failing test in utils.py."),
        StepStart(step_id=step, turn_id=turn),
        AssistantMessage(
            blocks=(
                ReasoningBlock(text=REASONING),
                TextBlock(text="Let me run the tests."),
                ToolCallBlock(call_id=call, name="bash", arguments='{"cmd": "pytest -x"}'),
            )
        ),
        ToolResult(call_id=call, content="1 failed: test_parse"),
        StepEnd(step_id=step),
    ]


OPEN = Session(events=tuple(tool_turn()), system=("You are a coding agent.",))  # type: ignore[arg-type]
CHAT = Session(
    events=(
        TurnStart(turn_id="t1"),
        UserMessage(content="hello"),
        StepStart(step_id="s1", turn_id="t1"),
        AssistantMessage(blocks=(TextBlock(text="hi"),)),
        StepEnd(step_id="s1"),
    )
)
UPDATE = packet("the agent never read the fixture")


def reviewer_for(caller: object, **options: object) -> Reviewer:
    runner = ReviewRunner(caller, packet_max_chars=10_000)  # type: ignore[arg-type]
    return Reviewer(runner, ReviewConfig(), **options)  # type: ignore[arg-type]


async def test_manual_review_publishes_a_plugin_message(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        review = await reviewer_for(c).review(
            OPEN, window=Window.current_turn(), mask=Mask.REASONING_ONLY, session_id="s"
        )
        record = await store.traces.get(review.trace_id or "")
    assert review.accepted and review.skipped is None
    assert review.publication is not None
    assert review.publication.source is MessageSource.PLUGIN
    assert review.request is not None and review.request.mode is RequestMode.CACHE_ALIGNED
    assert record is not None and record.run.meta["projection"]["mask"] == "reasoning-only"
    decision = [e for e in record.events if e.kind is EventKind.DECISION][0]
    assert decision.data["published"] is True
    (sent,) = simulator.requests()
    assert REASONING not in json.dumps(sent["messages"])
    assert "1 failed: test_parse" in json.dumps(sent["messages"])
    document = review.as_json()
    assert document["accepted"] is True and document["outcome"]["published"] is True


@pytest.mark.parametrize(
    ("policy", "answer", "published"),
    [
        (PublicationPolicy.UPDATES_ONLY, packet(), False),
        (PublicationPolicy.ALL, packet(), True),
        (PublicationPolicy.OBSERVE_ONLY, UPDATE, False),
    ],
)
async def test_policy_decides_what_reaches_the_primary(
    simulator: RunningSimulator, policy: PublicationPolicy, answer: str, published: bool
) -> None:
    simulator.load(scenario({"content": answer}))
    async with open_caller(sim_config(simulator)) as caller:
        review = await reviewer_for(caller, policy=policy).review(
            OPEN, window=Window.recent(1), mask=Mask.ACTION_ONLY
        )
    assert review.accepted
    assert (review.publication is not None) is published
    assert review.outcome is not None and review.outcome.published is published


async def test_a_projection_too_large_is_skipped_before_any_call(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        runner = ReviewRunner(c, packet_max_chars=10_000)
        reviewer = Reviewer(runner, ReviewConfig(max_snapshot_chars=50))
        review = await reviewer.review(OPEN, window=Window.recent(3), mask=Mask.NONE)
        record = await store.traces.get(review.trace_id or "")
    assert review.skipped is not None and review.skipped.reason is SkipReason.OVER_CHARS
    assert review.outcome is None and review.publication is None and not review.accepted
    assert simulator.requests() == []
    assert record is not None and (record.run.outcome, record.run.reason) == (
        "skipped",
        "over_chars",
    )
    assert review.as_json()["skipped"] == "over_chars"


def _route_config(simulator: RunningSimulator, **route: object) -> Config:
    return Config(
        routes={"sim": simulator.route("sim-reviewer", timeout_s=5, **route)},
        roles={"reviewer": "sim"},  # type: ignore[arg-type]
    )


async def test_a_request_over_the_routes_token_budget_is_skipped_with_its_estimate(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": UPDATE}, {"content": UPDATE}))
    window, mask = Window.recent(1), Mask.REASONING_ONLY
    # No budget: the estimate (bytes of the whole request, one byte a token) is recorded.
    async with open_caller(_route_config(simulator)) as caller:
        free = await reviewer_for(caller).review(OPEN, window=window, mask=mask)
    assert free.accepted and free.request is not None
    tokens = free.meta.request_tokens
    assert tokens == free.request.total_bytes and free.meta.token_budget is None
    # The snapshot alone is far under the budget: the system prompt, the tools, the prefix
    # and the instruction count too.
    assert free.meta.chars < tokens
    # Exactly at the budget it is sent; one token over, it is skipped before any call.
    async with open_caller(_route_config(simulator, max_request_tokens=tokens)) as caller:
        fits = await reviewer_for(caller).review(OPEN, window=window, mask=mask)
    assert fits.accepted and fits.meta.token_budget == tokens
    assert len(simulator.requests()) == 2
    config = _route_config(simulator, max_request_tokens=tokens - 1)
    async with opened_store(tmp_path) as store, open_caller(config, store) as caller:
        over = await reviewer_for(caller).review(OPEN, window=window, mask=mask)
        record = await store.traces.get(over.trace_id or "")
    assert over.skipped is not None and over.skipped.reason is SkipReason.OVER_TOKENS
    assert (over.meta.request_tokens, over.meta.token_budget) == (tokens, tokens - 1)
    assert over.request is None and over.outcome is None and over.publication is None
    assert len(simulator.requests()) == 2  # nothing more was sent, nothing cut to fit
    assert record is not None and (record.run.outcome, record.run.reason) == (
        "skipped",
        "over_tokens",
    )
    projection = record.run.meta["projection"]
    assert (projection["request_tokens"], projection["token_budget"]) == (tokens, tokens - 1)
    assert over.as_json()["skipped"] == "over_tokens"
    # The estimator is the route's: four bytes a token quarters the estimate.
    config = _route_config(simulator, max_request_tokens=tokens - 1, bytes_per_token=4.0)
    simulator.load(scenario({"content": UPDATE}))
    async with open_caller(config) as caller:
        quarter = await reviewer_for(caller).review(OPEN, window=window, mask=mask)
    assert quarter.accepted and quarter.meta.request_tokens == -(-tokens // 4)


def test_route_token_settings_are_strict() -> None:
    for bad in ({"max_request_tokens": 0}, {"bytes_per_token": 0}, {"bytes_per_token": -1}):
        with pytest.raises(ValidationError):
            RouteConfig(**bad)  # type: ignore[arg-type]


SCREENSHOT = "https://example.org/failing-test.png"
WITH_IMAGE = Session(
    events=(
        TurnStart(turn_id="t1"),
        UserMessage(
            content="Why does this page render blank?", images=(ImageBlock(ref=SCREENSHOT),)
        ),
        *tool_turn()[2:],
    ),  # type: ignore[arg-type]
    system=("You are a coding agent.",),
)


@pytest.mark.parametrize(
    ("images", "skip"),
    [(None, SkipReason.IMAGES_UNKNOWN), (False, SkipReason.IMAGES_UNSUPPORTED), (True, None)],
    ids=["support-unknown", "text-only", "takes-images"],
)
async def test_images_go_only_to_a_route_that_says_it_takes_them(
    simulator: RunningSimulator, tmp_path: Path, images: bool | None, skip: SkipReason | None
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    config = Config(
        routes={"sim": simulator.route("sim-reviewer", timeout_s=5, images=images)},
        roles={"reviewer": "sim"},  # type: ignore[arg-type]
    )
    async with opened_store(tmp_path) as store, open_caller(config, store) as caller:
        review = await reviewer_for(caller).review(
            WITH_IMAGE, window=Window.current_turn(), mask=Mask.REASONING_ONLY
        )
        record = await store.traces.get(review.trace_id or "")
    assert record is not None
    if skip is None:
        assert review.accepted and review.skipped is None
        (sent,) = simulator.requests()
        parts = [
            p for m in sent["messages"] if isinstance(m["content"], list) for p in m["content"]
        ]
        assert {"type": "image_url", "image_url": {"url": SCREENSHOT}} in parts
        return
    # Skipped before any call, with the image count: never sent blind, never as a placeholder.
    assert review.skipped is not None and review.skipped.reason is skip
    assert review.skipped.meta.images == 1 and review.outcome is None
    assert simulator.requests() == []
    assert (record.run.outcome, record.run.reason) == ("skipped", skip.value)
    assert review.as_json()["skipped"] == skip.value


async def test_checkpoint_runs_once_per_turn(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": UPDATE}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        first = await reviewer.checkpoint(OPEN, session_id="s")
        again = await reviewer.checkpoint(OPEN, session_id="s")
        other_session = await reviewer.checkpoint(OPEN, session_id="s2")
    assert first.decision.run and first.turn_id == "t1"
    assert first.review is not None and first.review.accepted
    assert first.publication is not None and first.publication.source is MessageSource.PLUGIN
    assert again.decision.skip is CheckpointSkip.ALREADY_ATTEMPTED and again.review is None
    assert other_session.decision.run
    assert len(simulator.requests()) == 2


async def test_checkpoint_latches_even_when_the_review_fails(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": "prose, no packet"}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        first = await reviewer.checkpoint(OPEN, session_id="s")
        again = await reviewer.checkpoint(OPEN, session_id="s")
    assert first.review is not None and first.review.outcome is not None
    assert first.review.outcome.reason is ReviewReason.REVIEW_MALFORMED
    assert first.publication is None
    assert again.decision.skip is CheckpointSkip.ALREADY_ATTEMPTED


async def test_checkpoint_skips_a_turn_without_tools(simulator: RunningSimulator) -> None:
    async with open_caller(sim_config(simulator)) as caller:
        result = await reviewer_for(caller).checkpoint(CHAT, session_id="s")
        empty = await reviewer_for(caller).checkpoint(Session(), session_id="s")
    assert result.decision.skip is CheckpointSkip.NO_TOOLS and result.turn_id == "t1"
    assert empty.decision.skip is CheckpointSkip.NO_TOOLS and empty.turn_id is None
    assert simulator.requests() == []


async def test_checkpoint_skips_a_turn_a_manual_masked_review_covered(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        await reviewer.review(OPEN, window=Window.recent(1), mask=Mask.NONE, session_id="s")
        unmasked = await reviewer.checkpoint(OPEN, session_id="s")  # a control is not masked
        await reviewer.review(
            OPEN, window=Window.recent(1), mask=Mask.REASONING_ONLY, session_id="s2"
        )
        covered = await reviewer.checkpoint(OPEN, session_id="s2")
    assert unmasked.decision.run
    assert covered.decision.skip is CheckpointSkip.MANUAL_REVIEW_RAN
    assert len(simulator.requests()) == 3


async def test_budget_skips_do_not_latch(simulator: RunningSimulator, tmp_path: Path) -> None:
    simulator.load(scenario({"content": UPDATE}))
    empty = CallBudget(1)
    empty.take()
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        skipped = await reviewer.checkpoint(OPEN, session_id="s", budget=empty)
        assert skipped.decision.skip is CheckpointSkip.NO_BUDGET
        assert not reviewer.latch.attempted("s", "t1")
        later = await reviewer.checkpoint(OPEN, session_id="s", budget=CallBudget(1))
    assert later.decision.run and later.review is not None and later.review.accepted


async def test_a_daily_limit_hit_during_the_run_gives_the_attempt_back(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    routes = {"sim": simulator.route("sim-reviewer", daily_calls=0)}
    config = Config(routes=routes, roles={"reviewer": "sim"})  # type: ignore[arg-type]
    latch = CheckpointLatch()
    async with opened_store(tmp_path) as store, open_caller(config, store) as caller:
        result = await reviewer_for(caller, latch=latch).checkpoint(OPEN, session_id="s")
    assert result.review is not None and result.review.outcome is not None
    assert result.review.outcome.reason is ReviewReason.BUDGET_EXHAUSTED
    assert not latch.attempted("s", "t1")  # a later stop may try again
    assert simulator.requests() == []


async def test_checkpoint_after_the_turn_moved_on_considers_the_new_turn(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    two_turns = OPEN.extend(
        [TurnEnd(turn_id="t1", reason=EndReason.COMPLETED), *tool_turn("t2", "s2", "c2")]
    )  # type: ignore[list-item]
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        await reviewer.checkpoint(OPEN, session_id="s")
        second = await reviewer.checkpoint(two_turns, session_id="s")
    assert second.turn_id == "t2" and second.decision.run


def test_projection_json_has_the_wire_messages_or_only_metadata() -> None:
    shown = projection_json(
        project_session(OPEN, Window.current_turn(), Mask.REASONING_ONLY, ReviewConfig())
    )
    assert shown["skipped"] is None and shown["snapshot"]["role"] == "user"
    assert REASONING not in json.dumps(shown)
    skipped = projection_json(
        project_session(CHAT, Window.current_turn(), Mask.NONE, ReviewConfig(max_snapshot_chars=1))
    )
    assert skipped == {"skipped": "over_chars", "projection": skipped["projection"]}
