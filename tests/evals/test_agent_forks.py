"""Agent arms are forks: one Primary run per case and sample up to its turn stop, shared.

Real eval runs over scripted models through ``foureyes simulate``: the arms' details and
traces name one prefix, the simulator sees the prefix's requests once, a reviewer slower
than its deadline is that arm's timeout (never a false diversion), samples get prefixes
and seeds of their own, the simple-verifier arm re-runs the check with no model, always-
show shows a ``no_update``, and the ``deliberate`` arm offers the tool from the first step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foureyes.evals.agent_arm import AGENT_RUN_KIND
from foureyes.evals.arms import arm_routes
from foureyes.evals.cassette import eval_providers
from foureyes.evals.report import load_metrics
from foureyes.evals.runner import EvalRunner
from foureyes.store import Store
from tests.evals._support import store
from tests.evals.test_agent_arms import (
    MASKED,
    NO_UPDATE,
    PRIMARY,
    PRIMARY_USAGE,
    REVIEWER,
    REVIEWER_USAGE,
    SHOWN,
    call,
    one_task_suite,
    packet,
    sim_config,
)
from tests.helpers.simulator import RunningSimulator, simulator, simulator_process

__all__ = ["simulator", "simulator_process", "store"]

SIMPLE = {"name": "simple-verifier", "check": "simple-verifier"}
ALWAYS = {"name": "always", "mask": "reasoning-only", "window": "all-turns", "always_show": True}
DELIBERATE = {"name": "deliberate-offered", "check": "deliberate"}


def clamp_scenario(*, reviewer: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The Primary makes the plausible wrong fix, and the right one once shown a packet."""
    return {
        "models": {
            PRIMARY: [
                {
                    "match": SHOWN,
                    "usage": PRIMARY_USAGE,
                    "tool_calls": [
                        call(
                            "edit",
                            path="clamp.py",
                            old="return min(x, hi)",
                            new="return max(lo, min(x, hi))",
                        )
                    ],
                },
                {
                    "match": "clamp\\(x, lo, hi\\) in clamp.py",
                    "usage": PRIMARY_USAGE,
                    "tool_calls": [
                        call("edit", path="clamp.py", old="max(lo, min(x, lo))", new="min(x, hi)")
                    ],
                },
                {
                    "match": "^replaced 1 occurrence in clamp.py",
                    "usage": PRIMARY_USAGE,
                    "reasoning_content": "The report is about x above hi; min(x, hi) does it.",
                    "content": "Fixed: clamp now returns min(x, hi).",
                },
            ],
            REVIEWER: reviewer
            or [
                {
                    "match": MASKED,
                    "usage": REVIEWER_USAGE,
                    "content": packet(("possible_error", "A value below lo is not raised to lo.")),
                },
                {"usage": REVIEWER_USAGE, "content": NO_UPDATE},
            ],
        }
    }


async def run(
    simulator: RunningSimulator,
    tmp_path: Path,
    store: Store,
    run_id: str,
    names: tuple[str, ...],
    *extra: dict[str, Any],
    **options: Any,
) -> dict[str, dict[str, Any]]:
    cfg = sim_config(simulator, tmp_path)
    suite = one_task_suite(tmp_path / "suite", "clamp", *extra, names=names)
    providers = eval_providers(cfg, arm_routes(cfg, suite.arms), {})
    try:
        summary = await EvalRunner(
            suite,
            suite.arms,
            config=cfg,
            providers=providers,
            store=store,
            run_id=run_id,
            **options,
        ).run()
    finally:
        for provider in providers.values():
            await provider.aclose()
    assert summary.failures == 0
    return {
        f"{r.case_id}/{r.arm}": {**r.record["detail"], "passed": r.passed}
        for r in await store.evals.results(run_id)
    }


def primary_requests(simulator: RunningSimulator) -> list[dict[str, Any]]:
    return [r for r in simulator.requests() if r["model"] == PRIMARY]


async def test_every_arm_starts_from_one_prefix_run_once_and_traced_once(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    simulator.load(clamp_scenario())
    names = ("baseline", "full-fork-same", "masked-same", "observe-only")
    rows = await run(simulator, tmp_path, store, "forks", names, SIMPLE, ALWAYS)
    rows = {key.split("/")[1]: row for key, row in rows.items()}
    prefixes = {row["prefix_sha256"] for row in rows.values()}
    assert len(prefixes) == 1 and None not in prefixes
    assert {row["prefix_trace_id"] for row in rows.values()} == {
        rows["baseline"]["prefix_trace_id"]
    }
    assert all(row["forked"] for row in rows.values())
    # The prefix ran once (2 calls: the wrong fix, the answer); only the arms that showed a
    # packet called the Primary again (2 calls each: the right fix, the answer). Run
    # separately, the 6 arms would have sent 2 calls each and 2 more per packet shown.
    shown = [name for name, row in rows.items() if row.get("shown")]
    assert sorted(shown) == ["always", "masked-same", "simple-verifier"]
    assert len(primary_requests(simulator)) == 2 + 2 * len(shown)
    # Arms differ only after the review: the baseline is the prefix, and so is every arm
    # that showed nothing.
    assert not rows["baseline"]["passed"] and not rows["observe-only"]["passed"]
    assert not rows["full-fork-same"]["passed"]
    assert rows["masked-same"]["passed"] and rows["simple-verifier"]["passed"]
    for name in ("baseline", "full-fork-same", "observe-only"):
        assert rows[name]["session_sha256"] == rows["baseline"]["session_sha256"]
    # The trace shows it: one prefix run with its calls, each arm's run a fork of it.
    prefix = await store.traces.get(rows["baseline"]["prefix_trace_id"])
    assert prefix is not None and prefix.run.kind == AGENT_RUN_KIND
    assert prefix.run.meta["prefix"] is True and prefix.run.outcome == "completed"
    assert sum(e.kind == "model_call" for e in prefix.events) == 2
    for name in shown:
        forked = await store.traces.get(rows[name]["trace_id"])
        assert forked is not None and forked.run.meta["fork_of"] == prefix.run.trace_id
        assert sum(e.kind == "model_call" for e in forked.events) == 2
    assert rows["baseline"]["trace_id"] is None  # the baseline made no call of its own
    # The simple verifier called no model: the reviewer saw one review per reviewing arm.
    reviews = [r for r in simulator.requests() if r["model"] == REVIEWER]
    assert len(reviews) == 4  # full-fork-same, masked-same, observe-only, always


async def test_always_show_shows_a_no_update_and_updates_only_does_not(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    simulator.load(clamp_scenario(reviewer=[{"usage": REVIEWER_USAGE, "content": NO_UPDATE}]))
    rows = await run(simulator, tmp_path, store, "always", ("baseline", "masked-same"), ALWAYS)
    rows = {key.split("/")[1]: row for key, row in rows.items()}
    assert rows["always"]["shown"] is True and rows["always"]["packet_status"] == "no_update"
    assert rows["masked-same"]["shown"] is False


async def test_a_reviewer_slower_than_its_deadline_is_a_timeout_never_a_diversion(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    simulator.load(
        clamp_scenario(reviewer=[{"usage": REVIEWER_USAGE, "fault": "hang", "content": "x"}])
    )
    names = ("baseline", "masked-same", "observe-only")
    rows = await run(
        simulator, tmp_path, store, "slow", names, review_deadline_s=0.5, pair_deadline_s=60
    )
    rows = {key.split("/")[1]: row for key, row in rows.items()}
    for name in ("masked-same", "observe-only"):
        assert rows[name]["review_timeout"] is True and rows[name]["timeout"] == "review"
        assert rows[name]["shown"] is False
        # Scored on what the Primary did: the prefix, as the baseline.
        assert rows[name]["passed"] == rows["baseline"]["passed"]
        assert rows[name]["session_sha256"] == rows["baseline"]["session_sha256"]
    _, metrics = await load_metrics(store, "slow")
    arms = {a.arm: a for a in metrics.arms}
    for name in ("masked-same", "observe-only"):
        assert arms[name].false_diversion_rate == 0.0 and arms[name].correction_rate == 0.0
        review = arms[name].review
        assert review is not None and review.timeouts is not None
        assert review.timeouts.estimate == 1.0


async def test_each_sample_has_its_own_prefix_and_seed(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    simulator.load(clamp_scenario())
    rows = await run(
        simulator, tmp_path, store, "samples", ("baseline", "masked-same"), samples=3, seed=2
    )
    assert sorted(rows) == [
        f"clamp#{n}/{arm}" for n in (1, 2, 3) for arm in ("baseline", "masked-same")
    ]
    traces = {rows[f"clamp#{n}/baseline"]["prefix_trace_id"] for n in (1, 2, 3)}
    assert len(traces) == 3
    for n in (1, 2, 3):
        assert rows[f"clamp#{n}/baseline"]["sample"] == n
        assert (
            rows[f"clamp#{n}/baseline"]["prefix_trace_id"]
            == rows[f"clamp#{n}/masked-same"]["prefix_trace_id"]
        )
    seeds = sorted({r["options"]["seed"] for r in primary_requests(simulator)})
    assert seeds == [2001, 2002, 2003]
    # 3 prefixes of 2 calls, and a continuation of 2 calls in each masked fork.
    assert len(primary_requests(simulator)) == 3 * (2 + 2)


async def test_the_deliberate_arm_offers_the_tool_from_its_first_step(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    scenario = clamp_scenario()
    scenario["models"][PRIMARY].insert(
        0,
        {
            "match": "clamp\\(x, lo, hi\\) in clamp.py",
            "times": 1,
            "usage": PRIMARY_USAGE,
            "tool_calls": [call("deliberate", role="masked-review")],
        },
    )
    scenario["models"][PRIMARY].insert(
        0,
        {
            "match": '"deliberate"',
            "usage": PRIMARY_USAGE,
            "tool_calls": [
                call("edit", path="clamp.py", old="max(lo, min(x, lo))", new="max(lo, min(x, hi))")
            ],
        },
    )
    simulator.load(scenario)
    rows = await run(simulator, tmp_path, store, "deliberate", ("baseline",), DELIBERATE)
    rows = {key.split("/")[1]: row for key, row in rows.items()}
    assert rows["deliberate-offered"]["deliberate_calls"] == 1
    assert rows["deliberate-offered"]["prefix_sha256"] is None  # a sample of its own
    assert rows["deliberate-offered"]["passed"] and not rows["baseline"]["passed"]
    offered = [
        r
        for r in primary_requests(simulator)
        if any(t["function"]["name"] == "deliberate" for t in r["options"].get("tools", []))
    ]
    assert offered and offered[0]["messages"][-1]["role"] == "user"
