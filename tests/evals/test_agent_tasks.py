"""The agent-task suite: every task's verifier tells the right fix from a plausible wrong one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from foureyes.evals.agent_tasks import AgentTask, TaskFix, agent_task, apply_fix, task_workspace
from foureyes.evals.suite import SuiteError, SuiteKind, load_suite, suite_path
from foureyes.evals.verify import VerifierResult

SUITE = load_suite(suite_path("agent-tasks"))
TASKS = [agent_task(SUITE, case) for case in SUITE.cases]

PASSED, REJECTED = VerifierResult.PASSED, VerifierResult.REJECTED


def test_the_suite_ships_at_least_twelve_agent_tasks() -> None:
    assert SUITE.kind is SuiteKind.AGENT and len(TASKS) >= 12
    assert SUITE.baseline.name == "baseline"


@pytest.mark.parametrize("task", TASKS, ids=[t.case.id for t in TASKS])
async def test_the_verifier_fails_shipped_and_wrong_fix_and_passes_the_right_fix(
    task: AgentTask,
) -> None:
    with task_workspace(task) as shipped:
        assert (await task.weak_check(shipped), await task.verify(shipped)) == (REJECTED, REJECTED)
    with task_workspace(task) as wrong:
        apply_fix(task, TaskFix.WRONG, wrong)
        assert (await task.weak_check(wrong), await task.verify(wrong)) == (PASSED, REJECTED)
    with task_workspace(task) as right:
        apply_fix(task, TaskFix.RIGHT, right)
        assert (await task.weak_check(right), await task.verify(right)) == (PASSED, PASSED)
    # Every run gets its own copy: the fixes above never reached the shipped repository.
    with task_workspace(task) as again:
        assert await task.verify(again) is REJECTED


def test_the_verifier_lives_outside_the_repository_the_primary_sees() -> None:
    for task in TASKS:
        script = Path(task.verifier_argv()[1])
        assert script.is_file() and not script.is_relative_to(task.folder / "repo")


def test_a_broken_agent_case_refuses_the_suite_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "suite"
    shutil.copytree(suite_path("agent-tasks"), folder)
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    cases[0]["state"]["task"] = "../outside"
    cases[1]["state"]["weak_check"] = "missing.py"
    cases[2]["verifier"] = []
    shutil.rmtree(folder / cases[3]["state"]["task"] / "wrong")
    (folder / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    with pytest.raises(SuiteError) as caught:
        load_suite(folder)
    named = {p.split(":")[0] for p in caught.value.problems}
    assert named == {f"case {c['id']}" for c in cases[:4]}


def test_the_suite_digest_covers_the_task_files(tmp_path: Path) -> None:
    folder = tmp_path / "suite"
    shutil.copytree(suite_path("agent-tasks"), folder)
    before = load_suite(folder).sha256
    assert before == SUITE.sha256  # the same files wherever they lie
    verifier = folder / "tasks" / "clamp" / "verify.py"
    verifier.write_text(verifier.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert load_suite(folder).sha256 != before
