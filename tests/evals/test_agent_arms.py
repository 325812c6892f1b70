"""The reviewing arms of agent-tasks, offline: scripted models through ``foureyes simulate``.

Two scenarios, each a real eval run (the Primary loop, the one reviewer runner, the task's
hidden verifier in a fresh copy) with the metrics and report computed from the store:

- masking changes the finding: the unmasked control is anchored by the Primary's
  reasoning and has nothing to add; the masked reviewer flags the plausible-wrong fix, and
  the Primary fixes the task only when it sees that packet: a correction for the masked
  arm, none for the control, and observe-only counts the update it would have shown;
- the packet misleads: the Primary had the right fix, the masked reviewer talks it into
  the wrong one: a false diversion.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from foureyes.config import Config
from foureyes.evals.agent_arm import instruction_sha256
from foureyes.evals.arms import arm_routes, runnable_arms
from foureyes.evals.cassette import eval_providers
from foureyes.evals.metrics import ArmMetrics
from foureyes.evals.report import load_metrics, render_markdown
from foureyes.evals.runner import EvalRunner
from foureyes.evals.suite import Suite, load_suite, suite_path
from foureyes.evals.workspace import ReadOnlyTools, Workspace
from foureyes.review import Mask
from foureyes.review.request import DEFAULT_PERSONA_WITH_TOOLS
from foureyes.store import Store
from tests.evals._support import eval_config, store
from tests.helpers.simulator import RunningSimulator, simulator, simulator_process

__all__ = ["simulator", "simulator_process", "store"]

PRIMARY, REVIEWER = "primary-sim", "reviewer-sim"
MASKED = "reasoning in the steps under review is not shown"
"""Only the masked arms' review instruction says this (the control's does not)."""
SHOWN = "DATA review_packet"
"""What a published packet carries into the Primary's context."""
ARMS = ("baseline", "full-fork-same", "masked-same", "observe-only", "all-turns")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": json.dumps(arguments)}


def usage(prompt: int, completion: int, reasoning: int, cached: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "reasoning_tokens": reasoning,
        "cached_tokens": cached,
    }


PRIMARY_USAGE = usage(100, 10, 4, 60)
REVIEWER_USAGE = usage(300, 20, 8, 200)


def packet(*items: tuple[str, str]) -> str:
    return json.dumps(
        {
            "role": "masked-review",
            "status": "update",
            "items": [{"kind": k, "certainty": "likely", "content": c} for k, c in items],
        }
    )


WRONG = "min(x, hi)"
NO_UPDATE = json.dumps({"role": "masked-review", "status": "no_update"})


def one_task_suite(
    folder: Path, case_id: str, *extra: dict[str, Any], names: tuple[str, ...] = ARMS
) -> Suite:
    """The shipped suite cut to one task and the arms ``names`` (and ``extra``)."""
    shutil.copytree(suite_path("agent-tasks"), folder)
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    (folder / "cases.json").write_text(
        json.dumps([c for c in cases if c["id"] == case_id]), encoding="utf-8"
    )
    head = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
    head["arms"] = [a for a in head["arms"] if a["name"] in names] + list(extra)
    (folder / "suite.json").write_text(json.dumps(head), encoding="utf-8")
    return load_suite(folder)


def sim_config(simulator: RunningSimulator, tmp_path: Path) -> Config:
    cfg = eval_config(
        tmp_path,
        primary_sim=simulator.route(PRIMARY, timeout_s=5).model_dump(),
        reviewer_sim=simulator.route(REVIEWER, timeout_s=5).model_dump(),
    )
    roles = {"primary": "primary_sim", "reviewer": "reviewer_sim"}
    return cfg.model_validate(cfg.model_dump() | {"roles": roles})


async def run_arms(
    simulator: RunningSimulator,
    tmp_path: Path,
    store: Store,
    case_id: str,
    run_id: str,
    *extra: dict[str, Any],
    names: tuple[str, ...] = ARMS,
) -> dict[str, ArmMetrics]:
    cfg = sim_config(simulator, tmp_path)
    suite = one_task_suite(tmp_path / "suite", case_id, *extra, names=names)
    providers = eval_providers(cfg, arm_routes(cfg, suite.arms), {})
    try:
        summary = await EvalRunner(
            suite, suite.arms, config=cfg, providers=providers, store=store, run_id=run_id
        ).run()
    finally:
        for provider in providers.values():
            await provider.aclose()
    assert summary.ran == len(names) + len(extra) and summary.failures == 0
    _, metrics = await load_metrics(store, run_id)
    return {a.arm: a for a in metrics.arms}


def details(rows: Any) -> dict[str, dict[str, Any]]:
    return {r.arm: {**r.record["detail"], "passed": r.passed} for r in rows}


async def test_masking_changes_the_finding_and_only_the_primary_that_sees_it_corrects(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    simulator.load(
        {
            "models": {
                PRIMARY: [
                    {  # only after a packet was shown: the right fix over the wrong one
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
                    {  # the plausible wrong fix: the reported case works, lo is lost
                        "match": "clamp\\(x, lo, hi\\) in clamp.py",
                        "usage": PRIMARY_USAGE,
                        "tool_calls": [
                            call(
                                "edit", path="clamp.py", old="max(lo, min(x, lo))", new="min(x, hi)"
                            )
                        ],
                    },
                    {
                        "match": "^replaced 1 occurrence in clamp.py",
                        "usage": PRIMARY_USAGE,
                        "reasoning_content": "The report is about x above hi; min(x, hi) does it.",
                        "content": "Fixed: clamp now returns min(x, hi).",
                    },
                ],
                REVIEWER: [
                    {
                        "match": MASKED,
                        "usage": REVIEWER_USAGE,
                        "content": packet(
                            ("possible_error", "A value below lo is no longer raised to lo."),
                            ("observation", "Clamp now returns min(x, hi)."),
                        ),
                    },
                    # The control sees the Primary's reasoning and is satisfied by it.
                    {"usage": REVIEWER_USAGE, "content": NO_UPDATE},
                ],
            }
        }
    )
    arms = await run_arms(simulator, tmp_path, store, "clamp", "masking")
    rows = details(await store.evals.results("masking"))
    assert not rows["baseline"]["passed"] and not rows["full-fork-same"]["passed"]
    assert rows["masked-same"]["passed"] and rows["all-turns"]["passed"]
    # The masked arm corrects the baseline; the unmasked control does not.
    assert arms["masked-same"].correction_rate == 1.0
    assert arms["full-fork-same"].correction_rate == 0.0
    assert arms["full-fork-same"].no_update_rate == 1.0
    assert arms["baseline"].correction_rate is None and arms["baseline"].pass_rate.estimate == 0
    # The Primary acted on the packet it was shown, and that made the task pass.
    masked = arms["masked-same"].review
    assert masked is not None
    assert masked.adoption is not None and masked.adoption.estimate == 1.0
    assert masked.adoption_precision is not None and masked.adoption_precision.estimate == 1.0
    # One of its two items restates what the Primary said ("clamp now returns min(x, hi)").
    assert masked.unique_delta is not None and masked.unique_delta.estimate == 0.5
    # Observe-only: the same review, never shown; the Primary stopped where the baseline did.
    observe = arms["observe-only"].review
    assert observe is not None and not rows["observe-only"]["passed"]
    assert rows["observe-only"]["shown"] is False and rows["observe-only"]["would_show"] is True
    assert observe.would_show is not None and observe.would_show.estimate == 1.0
    assert observe.adoption is None
    # Tokens: the Primary's calls and the reviewer's, every detail reported, summed.
    assert rows["masked-same"]["reasoning_tokens"] == 4 * 4 + 8  # 4 primary calls, 1 review
    assert rows["masked-same"]["cached_tokens"] == 4 * 60 + 200
    assert rows["baseline"]["reasoning_tokens"] == 2 * 4
    assert masked.reasoning_tokens == 24 and masked.cached_tokens == 440
    # Each arm's instruction: the control's differs from the masked arms'.
    cfg = sim_config(simulator, tmp_path)
    assert rows["full-fork-same"]["instruction_sha256"] == instruction_sha256(Mask.NONE, cfg)
    assert rows["masked-same"]["instruction_sha256"] == instruction_sha256(Mask.REASONING_ONLY, cfg)
    assert rows["masked-same"]["instruction_sha256"] != rows["full-fork-same"]["instruction_sha256"]
    assert "instruction_sha256" not in rows["baseline"]
    reviews = [r for r in simulator.requests() if r["model"] == REVIEWER]
    assert len(reviews) == 4  # one review per reviewing arm, at its turn stop
    control = [r for r in reviews if MASKED not in r["messages"][-1]["content"]]
    assert len(control) == 1 and "may not be shown" not in control[0]["messages"][-1]["content"]


async def test_a_misleading_packet_diverts_a_primary_that_had_it_right(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    right = "return LEVELS.index(level) >= LEVELS.index(minimum)"
    wrong = "return LEVELS.index(level) > LEVELS.index(minimum)"
    simulator.load(
        {
            "models": {
                PRIMARY: [
                    {
                        "match": SHOWN,
                        "usage": PRIMARY_USAGE,
                        "tool_calls": [call("edit", path="logfilter.py", old=right, new=wrong)],
                    },
                    {
                        "match": "filter_logs in logfilter.py",
                        "usage": PRIMARY_USAGE,
                        "tool_calls": [
                            call(
                                "edit",
                                path="logfilter.py",
                                old="return level >= minimum",
                                new=right,
                            )
                        ],
                    },
                    {"match": "^replaced 1 occurrence", "usage": PRIMARY_USAGE, "content": "Done."},
                ],
                REVIEWER: [
                    {
                        "match": MASKED,
                        "usage": REVIEWER_USAGE,
                        "content": packet(
                            ("suggestion", "Compare with a strict > to drop equals.")
                        ),
                    },
                    {"usage": REVIEWER_USAGE, "content": NO_UPDATE},
                ],
            }
        }
    )
    arms = await run_arms(simulator, tmp_path, store, "log-severity", "misled")
    assert arms["baseline"].pass_rate.estimate == 1.0
    assert arms["masked-same"].false_diversion_rate == 1.0
    assert arms["masked-same"].pass_rate.estimate == 0.0
    masked = arms["masked-same"].review
    assert masked is not None and masked.adoption is not None and masked.adoption.estimate == 1.0
    # It acted on the packet, and the packet was wrong.
    assert masked.adoption_precision is not None and masked.adoption_precision.estimate == 0.0
    assert arms["full-fork-same"].false_diversion_rate == 0.0
    assert arms["observe-only"].false_diversion_rate == 0.0
    comparison = arms["masked-same"].comparison
    assert comparison is not None and comparison.baseline_only == 1


async def test_the_report_shows_each_review_metric_and_each_arms_instruction_digest(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    simulator.load(
        {
            "models": {
                PRIMARY: [
                    {
                        "match": "clamp\\(x, lo, hi\\) in clamp.py",
                        "usage": PRIMARY_USAGE,
                        "tool_calls": [call("run", command="python check.py")],
                    },
                    {"usage": PRIMARY_USAGE, "content": "Nothing to fix."},
                ],
                REVIEWER: [{"usage": REVIEWER_USAGE, "content": "not a packet"}],
            }
        }
    )
    arms = await run_arms(simulator, tmp_path, store, "clamp", "report")
    masked = arms["masked-same"].review
    assert masked is not None and masked.format_failures is not None
    assert masked.format_failures.estimate == 1.0 and masked.timeouts is not None
    assert masked.timeouts.estimate == 0.0
    run, metrics = await load_metrics(store, "report")
    text = render_markdown(run, metrics)
    cfg = sim_config(simulator, tmp_path)
    for mask in (Mask.NONE, Mask.REASONING_ONLY):
        assert instruction_sha256(mask, cfg)[:16] in text
    for heading in ("adoption", "unique delta", "format failures", "cache-read tokens"):
        assert heading in text.lower()
    # The format failures, 1 of 1, with the exact interval (a bootstrap would collapse to
    # [100%, 100%]).
    assert "100.0% [2.5%, 100.0%]" in text


def test_masked_strong_is_left_out_with_a_note_without_a_strong_route(tmp_path: Path) -> None:
    cfg = Config.model_validate({"store": {"url": f"sqlite+aiosqlite:///{tmp_path}/x.db"}})
    suite = load_suite(suite_path("agent-tasks"))
    runnable, missing = runnable_arms(cfg, suite.arms)
    assert [a.name for a in runnable] == [
        "baseline",
        "full-fork-same",
        "masked-same",
        "action-only",
        "observe-only",
        "all-turns",
        "simple-verifier",
        "deliberate-offered",
    ]
    assert set(missing) == {"masked-strong"} and "strong" in missing["masked-strong"]


async def test_a_persona_reviewer_verifies_with_read_only_tools_in_the_pairs_workspace(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    simulator.load(
        {
            "models": {
                PRIMARY: [
                    {
                        "match": "clamp\\(x, lo, hi\\) in clamp.py",
                        "usage": PRIMARY_USAGE,
                        "tool_calls": [
                            call(
                                "edit", path="clamp.py", old="max(lo, min(x, lo))", new="min(x, hi)"
                            )
                        ],
                    },
                    {"usage": PRIMARY_USAGE, "content": "Fixed."},
                ],
                REVIEWER: [
                    # The persona reviewer reads the file the Primary edited...
                    {
                        "match": "Stop acting as the agent above",
                        "times": 1,
                        "usage": REVIEWER_USAGE,
                        "tool_calls": [call("read", path="clamp.py")],
                    },
                    # ...and answers from what the read returned.
                    {
                        "match": "return min\\(x, hi\\)",
                        "usage": REVIEWER_USAGE,
                        "content": packet(("possible_error", "clamp.py never applies lo.")),
                    },
                ],
            }
        }
    )
    persona = {"name": "persona", "mask": "reasoning-only", "mode": "reviewer-persona"}
    persona["window"] = "since-last-mutation"
    await run_arms(simulator, tmp_path, store, "clamp", "persona", persona, names=("baseline",))
    rows = details(await store.evals.results("persona"))
    assert rows["persona"]["review_reason"] == "accepted"
    assert rows["persona"]["packet_status"] == "update" and rows["persona"]["shown"]
    first, second = [r for r in simulator.requests() if r["model"] == REVIEWER]
    # The persona is told it may read, not that it calls no tools.
    assert first["messages"][0]["content"].startswith(DEFAULT_PERSONA_WITH_TOOLS)
    # Only read and search are offered; the second call carries the read's result.
    assert sorted(t["function"]["name"] for t in first["options"]["tools"]) == ["read", "search"]
    tool = second["messages"][-1]
    assert tool["role"] == "tool" and "return min(x, hi)" in tool["content"]
    # Three Primary calls (the last after the packet) and both review calls, summed.
    assert rows["persona"]["reasoning_tokens"] == 3 * 4 + 2 * 8


async def test_a_reviewer_calling_a_tool_that_is_not_read_only_ends_its_review_unrun(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("kept", encoding="utf-8")
    tools = ReadOnlyTools(Workspace(tmp_path))
    assert [s["function"]["name"] for s in tools.specs] == ["read", "search"]
    assert await tools.call("read", json.dumps({"path": "a.txt"})) == "kept"
    refused = await tools.call("edit", json.dumps({"path": "a.txt", "content": "gone"}))
    assert refused.startswith("error: no tool 'edit'")
    assert (await tools.call("read", json.dumps({"path": "../x"}))).startswith("error:")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "kept"
