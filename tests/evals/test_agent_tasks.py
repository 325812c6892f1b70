"""The agent-task suite: every task's verifier tells the right fix from a plausible wrong one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from foureyes.evals.agent_tasks import (
    AgentTask,
    FailureMode,
    TaskFix,
    agent_task,
    apply_fix,
    task_workspace,
)
from foureyes.evals.suite import SuiteError, SuiteKind, load_suite, suite_path
from foureyes.evals.verify import VerifierResult

SUITE = load_suite(suite_path("agent-tasks"))
TASKS = [agent_task(SUITE, case) for case in SUITE.cases]

PASSED, REJECTED = VerifierResult.PASSED, VerifierResult.REJECTED


def test_the_suite_ships_at_least_thirty_agent_tasks() -> None:
    assert SUITE.kind is SuiteKind.AGENT and len(TASKS) >= 30
    assert SUITE.baseline.name == "baseline"


def test_most_tasks_span_several_modules() -> None:
    def modules(task: AgentTask) -> int:
        repo = task.folder / "repo"
        return sum(1 for p in repo.rglob("*.py") if p.relative_to(repo).as_posix() != "check.py")

    several = [t.case.id for t in TASKS if modules(t) >= 2]
    assert len(several) >= 18 and 2 * len(several) > len(TASKS)


def test_every_task_names_the_failure_mode_it_targets() -> None:
    for task in TASKS:
        assert task.failure_mode in FailureMode and task.failure_note.strip()
    modes = [t.failure_mode for t in TASKS]
    # At least six tasks mislead an agent that reasons from the repository's trail.
    assert modes.count(FailureMode.RED_HERRING) >= 6


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


def test_each_fix_rewrites_every_file_the_other_one_changes() -> None:
    # A Primary that changes its mind (the scripted run's does) writes one fix over the
    # other: the result must be that fix alone, not a mix of the two.
    def files(task: AgentTask, fix: TaskFix) -> set[str]:
        root = task.folder / fix.value
        return {
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    for task in TASKS:
        assert files(task, TaskFix.RIGHT) == files(task, TaskFix.WRONG), task.case.id


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
    del cases[4]["state"]["failure_mode"]
    cases[5]["state"]["failure_mode"] = "bad-luck"
    cases[6]["state"]["failure_note"] = " "
    (folder / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    with pytest.raises(SuiteError) as caught:
        load_suite(folder)
    named = {p.split(":")[0] for p in caught.value.problems}
    assert named == {f"case {c['id']}" for c in cases[:7]}
    modes = [p for p in caught.value.problems if "failure_mode" in p]
    assert len(modes) == 2 and all("red-herring" in p for p in modes)


def test_the_suite_digest_covers_the_task_files(tmp_path: Path) -> None:
    folder = tmp_path / "suite"
    shutil.copytree(suite_path("agent-tasks"), folder)
    before = load_suite(folder).sha256
    assert before == SUITE.sha256  # the same files wherever they lie
    verifier = folder / "tasks" / "clamp" / "verify.py"
    verifier.write_text(verifier.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert load_suite(folder).sha256 != before
