"""Agent tasks: a tiny frozen repository per case, a hidden verifier, a weak check.

A task folder of an ``agent`` suite (``tasks/<id>/`` of ``agent-tasks``) holds

- ``repo/``: the repository the Primary works on, copied to a fresh temporary folder for
  every run (:func:`task_workspace`), so no run sees another's edits;
- the verifier (the case's ``verifier`` argv, e.g. ``{python} {task}/verify.py``), kept
  *outside* ``repo/`` so the Primary can neither read nor edit it, run in the workspace
  with this interpreter; it exits 0 only when the task is truly done;
- ``right/`` and ``wrong/``: the files of the recorded right fix and of a plausible wrong
  one, each replacing the repository's file of the same path (:func:`apply_fix`). The
  wrong fix passes the case's weak check (``state.weak_check``, a script of the
  repository showing the reported case, which the Primary may run) and fails the
  verifier, as a fix that only makes the reported example pass would.

Checks run with :func:`~foureyes.evals.verify.run_verifier` in the workspace, with the
minimal environment of the workspace's ``run`` tool.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from foureyes.core.errors import UsageError
from foureyes.evals.suite import Case, Suite, SuiteKind
from foureyes.evals.verify import VerifierResult, run_verifier
from foureyes.evals.workspace import minimal_env

__all__ = ["AgentTask", "TaskFix", "agent_task", "apply_fix", "task_workspace"]


class TaskFix(StrEnum):
    """A recorded fix of a task."""

    RIGHT = "right"
    """The fix that does the task."""
    WRONG = "wrong"
    """A plausible wrong fix: the weak check passes, the verifier does not."""


@dataclass(frozen=True, slots=True)
class AgentTask:
    """One case of an agent suite, with its folder."""

    case: Case
    """The case (its ``goal`` is the task statement given to the Primary)."""
    folder: Path
    """The task folder."""

    @property
    def statement(self) -> str:
        """What the Primary is asked to do."""
        return self.case.goal

    def verifier_argv(self) -> tuple[str, ...]:
        """The verifier with ``{python}`` and ``{task}`` filled in."""
        return tuple(
            arg.replace("{python}", sys.executable).replace("{task}", str(self.folder))
            for arg in self.case.verifier
        )

    def weak_argv(self) -> tuple[str, ...]:
        """The weak check: the repository's script, run with this interpreter."""
        return (sys.executable, self.case.state["weak_check"])

    async def verify(self, workspace: Path) -> VerifierResult:
        """Run the verifier in ``workspace``."""
        return await self._check(self.verifier_argv(), workspace)

    async def weak_check(self, workspace: Path) -> VerifierResult:
        """Run the weak check in ``workspace``."""
        return await self._check(self.weak_argv(), workspace)

    async def _check(self, argv: tuple[str, ...], workspace: Path) -> VerifierResult:
        return await run_verifier(
            argv,
            "",
            timeout_s=self.case.verifier_timeout_s,
            cwd=workspace,
            env=minimal_env(workspace),
        )


def agent_task(suite: Suite, case: Case) -> AgentTask:
    """The task of ``case`` in ``suite`` (loaded by :func:`~foureyes.evals.load_suite`).

    Raises:
        UsageError: ``suite`` is not an agent suite loaded from a folder.
    """
    if suite.kind is not SuiteKind.AGENT or suite.folder is None:
        raise UsageError(f"suite {suite.name!r} is not an agent suite loaded from a folder")
    return AgentTask(case, (suite.folder / case.state["task"]).resolve())


@contextmanager
def task_workspace(task: AgentTask) -> Iterator[Path]:
    """A fresh copy of the task's repository in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"foureyes-{task.case.id}-") as tmp:
        workspace = Path(tmp) / "repo"
        shutil.copytree(
            task.folder / "repo",
            workspace,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        yield workspace


def apply_fix(task: AgentTask, fix: TaskFix, workspace: Path) -> None:
    """Overwrite ``workspace``'s files with those of the task's recorded ``fix``."""
    source = task.folder / fix.value
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        target = workspace / file.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
