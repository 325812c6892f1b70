"""Agent tasks: a tiny frozen repository per case, a hidden verifier, a weak check.

A task folder of an ``agent`` suite (``tasks/<id>/`` of ``agent-tasks``) holds

- ``repo/``: the repository the Primary works on, copied to a fresh temporary folder for
  every run (:func:`task_workspace`), so no run sees another's edits;
- the verifier (the case's ``verifier`` argv, e.g. ``{python} {task}/verify.py``), kept
  *outside* ``repo/`` so the Primary can neither read nor edit it, run in the workspace
  with the sandbox's interpreter; it exits 0 only when the task is truly done;
- ``right/`` and ``wrong/``: the files of the recorded right fix and of a plausible wrong
  one, each replacing the repository's file of the same path (:func:`apply_fix`). The
  wrong fix passes the case's weak check (``state.weak_check``, a script of the
  repository showing the reported case, which the Primary may run) and fails the
  verifier, as a fix that only makes the reported example pass would.

The case's ``state.failure_mode`` (one of :class:`FailureMode`, checked by the loader) and
``state.failure_note`` say which kind of mistake the task targets and how its wrong fix
makes it.

Checks run with :func:`~foureyes.evals.verify.run_verifier` in the workspace, in the
sandbox and with the environment of the workspace's ``run`` tool (the Primary's code they
import is untrusted): in the bubblewrap sandbox ``{python}`` is its interpreter and
``{task}`` is ``/verifier``, where each file an argument names as ``{task}/<path>`` is
shown read-only for that verifier alone, never in the workspace, which a check sees
read-only.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from foureyes.core.errors import UsageError
from foureyes.evals.sandbox import Sandbox, active_sandbox
from foureyes.evals.suite import Case, FailureMode, Suite, SuiteKind
from foureyes.evals.verify import VerifierResult, run_verifier
from foureyes.evals.workspace import ToolLimits

__all__ = ["AgentTask", "FailureMode", "TaskFix", "agent_task", "apply_fix", "task_workspace"]


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

    @property
    def failure_mode(self) -> FailureMode:
        """The kind of mistake the task targets (``state.failure_mode``)."""
        return FailureMode(self.case.state["failure_mode"])

    @property
    def failure_note(self) -> str:
        """How the task's plausible wrong fix goes wrong (``state.failure_note``)."""
        return self.case.state["failure_note"]

    def verifier_argv(self) -> tuple[str, ...]:
        """The verifier with ``{python}`` and ``{task}`` filled in, as seen unsandboxed."""
        return tuple(
            arg.replace("{python}", sys.executable).replace("{task}", str(self.folder))
            for arg in self.case.verifier
        )

    def weak_argv(self) -> tuple[str, ...]:
        """The weak check: the repository's script, run with this interpreter."""
        return (sys.executable, self.case.state["weak_check"])

    async def verify(self, workspace: Path, sandbox: Sandbox | None = None) -> VerifierResult:
        """Run the verifier in ``workspace``, in ``sandbox`` (the :func:`active_sandbox`).

        Raises:
            SandboxUnavailable: the sandbox cannot be set up.
        """
        sandbox = sandbox or active_sandbox()
        inside = sandbox.task_path(self.folder)
        argv: list[str] = []
        shown: dict[str, Path] = {}
        for arg in self.case.verifier:
            if arg.startswith("{task}/"):
                rel = arg.removeprefix("{task}/")
                shown[f"{inside}/{rel}"] = self.folder / rel
            argv.append(arg.replace("{python}", sandbox.python).replace("{task}", inside))
        return await self._check(argv, workspace, sandbox, shown)

    async def weak_check(self, workspace: Path, sandbox: Sandbox | None = None) -> VerifierResult:
        """Run the weak check in ``workspace``, in ``sandbox`` (the :func:`active_sandbox`).

        Raises:
            SandboxUnavailable: the sandbox cannot be set up.
        """
        sandbox = sandbox or active_sandbox()
        argv = [sandbox.python, self.case.state["weak_check"]]
        return await self._check(argv, workspace, sandbox, {})

    async def _check(
        self, argv: list[str], workspace: Path, sandbox: Sandbox, shown: Mapping[str, Path]
    ) -> VerifierResult:
        await sandbox.check()
        root = workspace.resolve(strict=True)
        limits = ToolLimits()
        return await run_verifier(
            sandbox.command(
                argv,
                root=root,
                memory_bytes=limits.memory_bytes,
                max_processes=limits.max_processes,
                readonly=shown,
                writable=False,
            ),
            "",
            timeout_s=self.case.verifier_timeout_s,
            cwd=root,
            env=sandbox.env(root),
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
