"""The context-intervention ensemble: concurrent views, compressed without voting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.config import Config, ReviewConfig
from foureyes.core.errors import UsageError
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import ChatRequest, ChatResult
from foureyes.llm.routes import Routes
from foureyes.review.ensemble import (
    Divergence,
    Flip,
    View,
    ViewResult,
    calls_needed,
    compress,
    divergence_step,
    run_ensemble,
    standard_views,
    tool_names,
)
from foureyes.review.packet import check_packet
from foureyes.review.projection import Mask, ProjectionSkipped, SkipReason, Window, project
from foureyes.review.reviewer import Reviewer, SessionReview
from foureyes.review.runner import ReviewOutcome, ReviewReason, ReviewRunner
from foureyes.review.session import (
    EndReason,
    Session,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    TurnEnd,
)
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import open_caller, packet, scenario, sim_config
from tests.review._session_support import Build
from tests.review.test_reviewer import OPEN, REASONING


def items(*entries: tuple[str, str, str]) -> str:
    if not entries:
        return packet()
    body = [{"kind": k, "certainty": c, "content": t} for k, c, t in entries]
    return json.dumps({"role": "masked-review", "status": "update", "items": body})


SESSION = Build().turn("fix the parser").tool_step(1).tool_step(2).tool_step(3).session()
"""One open turn of three complete steps, each with reasoning, text and a call."""


def result(
    name: str, mask: Mask, answer: str | None, *, steps: int = 1, session: Session = SESSION
) -> ViewResult:
    projected = project(session, Window.recent(steps), mask, max_snapshot_chars=10**6, max_images=0)
    meta = projected.meta
    view = View(name, Window.recent(steps), mask)
    if answer is None:
        outcome = ReviewOutcome.no_packet(ReviewReason.REVIEW_TIMEOUT)
        return ViewResult(view, SessionReview(meta, None, None, outcome, None))
    checked = check_packet(answer, max_chars=10_000)
    assert checked.packet is not None
    outcome = ReviewOutcome.accepted(checked.packet, published=False)
    return ViewResult(view, SessionReview(meta, None, None, outcome, None))


TESTS_FAIL = ("observation", "certain", "Tests fail in test_parse")
FIXTURE = ("conclusion", "likely", "The fixture is wrong")
# The longer check needs one call, the shorter two: checks rank by calls, not length.
CHECK_LONG = ("suggestion", "likely", "Re-read the fixture file and compare it with its schema")
CHECK_SHORT = ("suggestion", "likely", "Run `pytest -x` then `git diff`")
SHOUTED = ("observation", "likely", "tests FAIL in test_parse")  # TESTS_FAIL, less sure
REWORDED = ("observation", "certain", "The tests are failing in test_parse.")


def test_compress_reports_stable_full_only_flips_divergence_and_check() -> None:
    results = [
        result("full", Mask.NONE, items(TESTS_FAIL, FIXTURE, CHECK_SHORT), steps=3),
        result("ro@1", Mask.REASONING_ONLY, items(REWORDED, CHECK_SHORT), steps=1),
        result("ao@3", Mask.ACTION_ONLY, items(SHOUTED, CHECK_LONG), steps=3),
        result("ao@1", Mask.ACTION_ONLY, None, steps=1),
    ]  # fmt: skip
    summary = compress(results, SESSION)
    assert summary.control == "full"
    assert summary.answered == ("full", "ro@1", "ao@3")
    assert summary.unanswered == (("ao@1", "review_timeout"),)
    # Reworded and shouted items match by normalised overlap, not by bytes.
    assert [i.content for i in summary.stable] == ["Tests fail in test_parse"]
    assert [i.content for i in summary.full_only] == ["The fixture is wrong"]
    assert summary.flips == (
        Flip("ao@3", "certainty", "Tests fail in test_parse", "certain", "likely"),
    )
    # Both masked views differ from the control; ro@1 first hides something at step 3,
    # ao@3 at step 1: the least masking that changes the finding is at step 3.
    assert summary.earliest_divergence == Divergence("s3", 1, 3, ("full", "ro@1"), False)
    assert summary.cheapest_check == CHECK_LONG[2] and summary.cheapest_check_calls == 1


def test_a_status_flip_under_masking() -> None:
    summary = compress(
        [
            result("full", Mask.NONE, items(FIXTURE)),
            result("masked", Mask.REASONING_ONLY, items()),
        ],
        SESSION,
    )
    assert summary.flips == (Flip("masked", "status", None, "update", "no_update"),)
    assert summary.earliest_divergence == Divergence("s3", 1, 3, ("full", "masked"), True)
    assert summary.stable == () and [i.content for i in summary.full_only] == [FIXTURE[2]]


def test_agreement_has_no_divergence_and_no_check() -> None:
    same = items(TESTS_FAIL, CHECK_SHORT)
    summary = compress(
        [result("full", Mask.NONE, same), result("m", Mask.ACTION_ONLY, same)], SESSION
    )
    assert summary.flips == () and summary.earliest_divergence is None
    assert summary.full_only == () and summary.cheapest_check is None
    assert len(summary.stable) == 2


def test_without_a_control_nothing_is_compared_to_it() -> None:
    summary = compress(
        [
            result("full", Mask.NONE, None),
            result("a", Mask.REASONING_ONLY, items(TESTS_FAIL)),
            result("b", Mask.ACTION_ONLY, items(FIXTURE)),
        ],
        SESSION,
    )
    assert summary.control is None and summary.flips == () and summary.earliest_divergence is None
    assert summary.stable == () and summary.full_only == ()
    assert compress([result("only", Mask.NONE, items(TESTS_FAIL))], SESSION).stable == ()


CORRECT = ("conclusion", "certain", "The fix is correct")
NOT_CORRECT = ("conclusion", "certain", "The fix is not correct")
PROBABLY = ("conclusion", "likely", "The fix is probably correct")  # CORRECT, hedged
ZH_CORRECT = ("conclusion", "certain", "修复是正确的")
ZH_WRONG = ("conclusion", "certain", "修复是错误的")


def test_a_reversed_conclusion_is_a_disagreement_not_a_certainty_change() -> None:
    summary = compress(
        [
            result("full", Mask.NONE, items(CORRECT, ZH_CORRECT, TESTS_FAIL), steps=3),
            result("ro@1", Mask.REASONING_ONLY, items(NOT_CORRECT, ZH_WRONG, TESTS_FAIL)),
        ],
        SESSION,
    )
    # "not correct" shares every content token with "correct": a reversal, not a match.
    assert summary.flips == (
        Flip("ro@1", "conclusion", CORRECT[2], CORRECT[2], NOT_CORRECT[2]),
        Flip("ro@1", "conclusion", ZH_CORRECT[2], ZH_CORRECT[2], ZH_WRONG[2]),
    )
    assert [i.content for i in summary.stable] == [TESTS_FAIL[2]]
    assert [i.content for i in summary.full_only] == [CORRECT[2], ZH_CORRECT[2]]
    assert summary.earliest_divergence == Divergence("s3", 1, 3, ("full", "ro@1"), False)


def test_a_hedged_restatement_is_a_certainty_change_not_a_reversal() -> None:
    summary = compress(
        [result("full", Mask.NONE, items(CORRECT)), result("m", Mask.ACTION_ONLY, items(PROBABLY))],
        SESSION,
    )
    assert summary.flips == (Flip("m", "certainty", CORRECT[2], "certain", "likely"),)
    assert [i.content for i in summary.stable] == [CORRECT[2]]


def test_an_item_contradicting_one_kept_before_is_not_dropped() -> None:
    summary = compress(
        [
            result("full", Mask.NONE, items(CORRECT)),
            result("full2", Mask.NONE, items(NOT_CORRECT, PROBABLY)),
            result("ao", Mask.ACTION_ONLY, items(TESTS_FAIL)),
        ],
        SESSION,
    )
    # PROBABLY restates CORRECT and is dropped; NOT_CORRECT is another conclusion.
    assert [i.content for i in summary.full_only] == [CORRECT[2], NOT_CORRECT[2]]
    assert summary.flips == ()


pool = st.sampled_from(
    [items(), items(TESTS_FAIL), items(FIXTURE, CHECK_SHORT), items(TESTS_FAIL, CHECK_LONG)]
)


@settings(max_examples=60)
@given(
    control=pool,
    masked=st.lists(st.tuples(pool, st.integers(1, 3)), min_size=1, max_size=4),
    copied=st.integers(0, 3),
)
def test_no_voting_a_repeated_view_changes_no_conclusion(
    control: str, masked: list[tuple[str, int]], copied: int
) -> None:
    views = [result("full", Mask.NONE, control)]
    views += [result(f"m{n}", Mask.REASONING_ONLY, a, steps=s) for n, (a, s) in enumerate(masked)]
    answer, steps = masked[copied % len(masked)]
    repeated = [*views, result("copy", Mask.REASONING_ONLY, answer, steps=steps)]
    before, after = compress(views, SESSION), compress(repeated, SESSION)
    assert before.stable == after.stable and before.full_only == after.full_only
    assert before.cheapest_check == after.cheapest_check
    assert {f for f in after.flips if f.view != "copy"} == set(before.flips)
    if before.earliest_divergence is not None:
        assert after.earliest_divergence is not None
        assert after.earliest_divergence.step_id == before.earliest_divergence.step_id


def test_views_that_project_alike_have_no_divergence_whatever_their_answers() -> None:
    # No step has reasoning: reasoning-only shows what the control shows, so its other
    # answer is sampling, not masking; action-only hides the text, from the masked step.
    plain = (
        Build()
        .turn("go")
        .step(TextBlock(text="T1"), ToolCallBlock(call_id="c1", name="bash", arguments="{}"),
              results=(ToolResult(call_id="c1", content="OUT1"),))
        .step(TextBlock(text="T2"), ToolCallBlock(call_id="c2", name="bash", arguments="{}"),
              results=(ToolResult(call_id="c2", content="OUT2"),))
        .session()
    )  # fmt: skip
    control = result("full", Mask.NONE, items(FIXTURE), steps=2, session=plain)
    same_view = result("ro@1", Mask.REASONING_ONLY, items(TESTS_FAIL), session=plain)
    assert compress([control, same_view], plain).earliest_divergence is None
    hides_text = result("ao@1", Mask.ACTION_ONLY, items(TESTS_FAIL), session=plain)
    summary = compress([control, same_view, hides_text], plain)
    assert summary.earliest_divergence == Divergence("s2", 1, 2, ("full", "ao@1"), False)
    assert divergence_step(plain, control.review.meta, same_view.review.meta) is None


def test_checks_rank_by_the_tool_calls_they_need() -> None:
    tools = tool_names(SESSION)
    assert tools == {"bash"}
    assert calls_needed("Re-read the fixture and compare it with its schema", tools) == 1
    assert calls_needed("Run `pytest -x` then `git diff`", tools) == 2
    assert calls_needed("Use bash to list it, then bash again, then `cat x`", tools) == 2
    assert calls_needed("Use bashful words", tools) == 1  # a word that only contains a name


def test_standard_views() -> None:
    views = standard_views((3, 1), other_route="strong")
    assert [v.name for v in views] == [
        "full",
        "reasoning-only@recent:1",
        "action-only@recent:1",
        "reasoning-only@recent:3",
        "action-only@recent:3",
        "full@strong",
    ]
    assert views[0].window == Window.recent(3) and views[0].mask is Mask.NONE
    assert views[-1].route == "strong"
    with pytest.raises(UsageError):
        standard_views(())
    with pytest.raises(UsageError):
        standard_views((0,))


class ReasoningSensitiveProvider:
    """A real Provider whose conclusion depends on whether it was shown the reasoning."""

    route = "sensitive"

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        sees = REASONING in json.dumps([m.to_wire() for m in request.messages])
        answer = items(TESTS_FAIL, FIXTURE) if sees else items(TESTS_FAIL, CHECK_SHORT)
        return ChatResult(text=answer, finish_reason="stop", latency_s=0.0, route=self.route,
                          model="sensitive")  # fmt: skip

    async def aclose(self) -> None:
        return None


def sensitive_reviewer() -> Reviewer:
    config = Config(
        routes={"sensitive": {"kind": "offline"}},  # type: ignore[dict-item]
        roles={"reviewer": "sensitive"},  # type: ignore[arg-type]
    )
    caller = ModelCaller(Routes(config, {"sensitive": ReasoningSensitiveProvider()}))
    return Reviewer(ReviewRunner(caller, packet_max_chars=10_000), ReviewConfig())


async def test_run_ensemble_finds_what_only_full_reasoning_concludes() -> None:
    ensemble = await run_ensemble(sensitive_reviewer(), OPEN, standard_views((1,)))
    summary = ensemble.summary
    assert [r.view.name for r in ensemble.results] == [
        "full",
        "reasoning-only@recent:1",
        "action-only@recent:1",
    ]
    assert all(r.review.publication is None for r in ensemble.results)  # observe-only
    assert [i.content for i in summary.stable] == [TESTS_FAIL[2]]
    assert [i.content for i in summary.full_only] == [FIXTURE[2]]
    assert summary.earliest_divergence is not None
    assert summary.earliest_divergence.views == ("full", "reasoning-only@recent:1")
    assert summary.earliest_divergence.step_id == OPEN.steps()[0].step_id
    assert summary.cheapest_check == CHECK_SHORT[2]


async def test_views_run_concurrently_over_http_with_another_route(
    simulator: RunningSimulator,
) -> None:
    simulator.load(
        {
            "models": {
                "sim-reviewer": [{"content": items(TESTS_FAIL), "fault": "delay", "delay_s": 3}],
                "sim-strong": [
                    {"content": items(TESTS_FAIL, FIXTURE), "fault": "delay", "delay_s": 3}
                ],
            }
        }
    )
    strong = Config(
        routes={"s": simulator.route("sim-strong")},
        roles={"reviewer": "s"},  # type: ignore[arg-type]
    )
    async with open_caller(sim_config(simulator)) as main, open_caller(strong) as other:
        reviewer = Reviewer(ReviewRunner(main, packet_max_chars=10_000), ReviewConfig())
        second = Reviewer(ReviewRunner(other, packet_max_chars=10_000), ReviewConfig())
        ensemble = await run_ensemble(
            reviewer,
            OPEN,
            standard_views((1, 2), other_route="strong"),
            reviewers={"strong": second},
            session_id="s",
        )
    requests = simulator.requests()
    assert sorted(r["model"] for r in requests) == ["sim-reviewer"] * 5 + ["sim-strong"]
    # each view is held 3 s by the simulator (room for a loaded machine): run together, the
    # last to arrive found all six in flight; run one after another (or per route), none
    # would see more than 1 (5)
    assert max(r["in_flight"] for r in requests) == 6
    summary = ensemble.summary
    assert summary.control == "full" and len(summary.answered) == 6
    assert [i.content for i in summary.stable] == [TESTS_FAIL[2]]
    assert summary.full_only[0].content == FIXTURE[2]  # only the other route, unmasked, saw it


async def test_a_skipped_view_is_reported_not_dropped(simulator: RunningSimulator) -> None:
    simulator.load(scenario({"content": items(TESTS_FAIL)}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = Reviewer(ReviewRunner(caller, packet_max_chars=10_000), ReviewConfig())
        views = [View("full", Window.recent(1), Mask.NONE),
                 View("turn", Window.current_turn(), Mask.ACTION_ONLY)]  # fmt: skip
        ensemble = await run_ensemble(reviewer, OPEN, views)  # open turn: both project
        ended = OPEN.append(TurnEnd(turn_id="t1", reason=EndReason.COMPLETED))
        partial = await run_ensemble(reviewer, ended, views)
    assert len(ensemble.summary.answered) == 2
    assert partial.summary.unanswered == (("turn", "no_open_turn"),)
    skipped = partial.results[1].review.skipped
    assert isinstance(skipped, ProjectionSkipped) and skipped.reason is SkipReason.NO_OPEN_TURN


async def test_misuse(simulator: RunningSimulator) -> None:
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = Reviewer(ReviewRunner(caller, packet_max_chars=10_000), ReviewConfig())
        twice = [View("a", Window.recent(1), Mask.NONE), View("a", Window.recent(2), Mask.NONE)]
        with pytest.raises(UsageError):
            await run_ensemble(reviewer, OPEN, twice)
        with pytest.raises(UsageError):
            await run_ensemble(reviewer, OPEN, standard_views(other_route="nowhere"))
    assert simulator.requests() == []
