"""Suites of frozen cases and the arms they are run under.

A suite is a folder holding ``suite.json`` (name, kind, description, arms) and
``cases.json`` (a list of cases). A case freezes its initial state and goal and is
scored by an expected label, a verifier command, or both. An arm is a named
configuration: which route serves each role, and the kind's switches.

A suite with a broken case is refused whole, with every broken case named: paired
evidence needs every arm to see the same cases, so silently dropping one would change
what the comparison means.
"""

from __future__ import annotations

import json
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import ConfigError
from foureyes.review.projection import Mask, Window
from foureyes.review.request import RequestMode

__all__ = [
    "Arm",
    "ArmCheck",
    "Case",
    "FailureMode",
    "Suite",
    "SuiteError",
    "SuiteKind",
    "load_suite",
    "shipped_suites",
    "suite_path",
    "tree_files",
    "tree_sha256",
]

_ID = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


class SuiteError(ConfigError):
    """A suite that cannot be run: its files are unreadable or some cases are broken."""


class SuiteKind(StrEnum):
    """What a suite's arms run."""

    GATE = "gate"
    """The release gate on a frozen draft; labels ``block`` or ``pass``."""
    TRIAGE = "triage"
    """Crisis triage of a text; labels are risk levels."""
    REVIEW = "review"
    """Masked review of a recorded agent session; a smoke suite needs no labels."""
    AGENT = "agent"
    """A Primary agent fixes a tiny repository; a verifier run in its workspace decides."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Case(_Frozen):
    """One frozen case."""

    id: str = Field(pattern=_ID)
    """Unique within the suite."""
    goal: str = Field(min_length=1)
    """What the system should do here, for the reader of a report."""
    state: dict[str, str] = Field(min_length=1)
    """Initial state: ``message`` and ``draft`` (gate), ``text`` (triage), ``session``
    (a file under the run's data root) and ``window`` (review), or ``task`` (a task folder
    of the suite), ``weak_check`` (a script of its repository), ``failure_mode`` (one of
    :class:`FailureMode`) and ``failure_note`` (agent); ``locale``."""
    expected: str | None = None
    """The expected label; compared with the arm's prediction."""
    verifier: tuple[str, ...] = ()
    """A command (argv) given the arm's output on stdin; exit status 0 passes. Agent
    cases run it in the task's workspace, ``{python}`` standing for this interpreter and
    ``{task}`` for the task folder."""
    verifier_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """How long the verifier may run before it is killed and the case fails."""


class ArmCheck(StrEnum):
    """What an agent arm does at the Primary's turn stop."""

    REVIEW = "review"
    """The reviewer reviews under the arm's ``mask`` (no mask: nothing, the baseline)."""
    SIMPLE_VERIFIER = "simple-verifier"
    """No model: the repository's visible check is re-run and its outcome shown to the
    Primary ("re-run the tests"), the control for an extra look without a reviewer."""
    DELIBERATE = "deliberate"
    """No automatic review: the Primary is offered the ``deliberate`` tool from its first
    step, so its run shares no prefix with the other arms (an independent sample)."""


class Arm(_Frozen):
    """A named configuration of the system."""

    name: str = Field(pattern=_ID)
    """Unique within the suite."""
    description: str = ""
    """What the arm changes."""
    baseline: bool = False
    """Whether the other arms are compared with this one (exactly one arm is)."""
    routes: dict[str, str] = Field(default_factory=dict)
    """Role name (``supervisor``, ``risk_l1``, ...) to the route that serves it."""
    supervisor: bool = True
    """Gate suites: whether the Supervisor reviews (off: only the rules checked in code)."""
    l2: bool = True
    """Triage suites: whether L2's level counts (off: L1's level is the prediction)."""
    mask: Mask | None = None
    """Review and agent suites: what the reviewer does not see; ``None`` for no review at
    all."""
    observe_only: bool = False
    """Review and agent suites: the review runs but is never shown to the primary."""
    mode: RequestMode = RequestMode.CACHE_ALIGNED
    """Agent suites: how the review request is built; ``reviewer-persona`` offers the
    reviewer the pair's workspace ``read`` and ``search`` tools, path-checked to it."""
    window: str = "current-turn"
    """Agent suites: the window the checkpoint review projects (``recent:K``,
    ``since-last-mutation``, ``current-turn``, ``all-turns``)."""

    @field_validator("window")
    @classmethod
    def _window(cls, value: str) -> str:
        Window.parse(value)  # raises ValueError naming the accepted forms
        return value

    budget_usd: float | None = Field(default=None, ge=0)
    """Spend after which this arm's remaining pairs are recorded as failures, unrun."""
    check: ArmCheck = ArmCheck.REVIEW
    """Agent suites: what happens at the Primary's turn stop (:class:`ArmCheck`)."""
    always_show: bool = False
    """Agent suites: show every accepted packet, ``no_update`` included (always inject),
    not only updates."""


class Suite(_Frozen):
    """A validated suite."""

    name: str = Field(pattern=_ID)
    """The suite's name."""
    kind: SuiteKind
    """What its arms run."""
    description: str = ""
    """What it measures."""
    labels: tuple[str, ...] = Field(min_length=1)
    """The closed set of expected labels."""
    arms: tuple[Arm, ...] = Field(min_length=1)
    """Its arms, the baseline among them."""
    cases: tuple[Case, ...] = Field(min_length=1)
    """Its cases."""
    _folder: Path | None = PrivateAttr(default=None)
    _files_sha256: str | None = PrivateAttr(default=None)

    @property
    def folder(self) -> Path | None:
        """The folder it was loaded from (agent cases' task folders are relative to it)."""
        return self._folder

    @property
    def baseline(self) -> Arm:
        """The arm the others are compared with."""
        return next(arm for arm in self.arms if arm.baseline)

    def arm(self, name: str) -> Arm:
        """The arm called ``name``.

        Raises:
            SuiteError: there is no such arm.
        """
        for arm in self.arms:
            if arm.name == name:
                return arm
        known = ", ".join(a.name for a in self.arms)
        raise SuiteError([f"suite {self.name!r} has no arm {name!r} (arms: {known})"])

    @property
    def sha256(self) -> str:
        """Digest of the suite's canonical form: a resumed run must match it.

        An agent suite's digest covers its task folders' files too, so a resumed run over a
        changed repository, verifier or fix is refused like one over changed cases.
        """
        dump = self.model_dump(mode="json")
        if self._files_sha256 is not None:
            return sha256_hex(canonical_json({"files": self._files_sha256, "suite": dump}))
        return sha256_hex(canonical_json(dump))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SuiteError([f"{path}: {exc}"]) from exc


def _case_problems(
    index: int, raw: Any, labels: tuple[str, ...], *, needs_check: bool
) -> tuple[Case | None, list[str]]:
    name = raw.get("id", f"#{index}") if isinstance(raw, dict) else f"#{index}"
    try:
        case = Case.model_validate(raw)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return None, [f"case {name}: {details}"]
    problems: list[str] = []
    if needs_check and case.expected is None and not case.verifier:
        problems.append(f"case {case.id}: needs an expected label or a verifier")
    if case.expected is not None and case.expected not in labels:
        problems.append(f"case {case.id}: label {case.expected!r} is not one of {list(labels)}")
    return case, problems


class FailureMode(StrEnum):
    """The closed set of failure modes an agent task targets (its ``state.failure_mode``).

    Each names how the task's recorded plausible-wrong fix goes wrong, so a report can
    say which kinds of mistake an arm catches.
    """

    EDGE_CASE = "edge-case"
    """The reported example works; an edge (empty, zero, equal, a boundary) does not."""
    OFF_BY_ONE = "off-by-one"
    """A count or bound one too many or one too few."""
    SPEC_MISREAD = "spec-misread"
    """The statement asks for more than its example shows, and the fix does the example."""
    CROSS_MODULE = "cross-module"
    """The cause lies in a module that others share; a fix where the symptom shows, or in
    one consumer, leaves the others broken."""
    RED_HERRING = "red-herring"
    """A comment, log line, error message or TODO of the repository points at the wrong
    cause; following it gives a fix that passes the visible check."""
    OVERFIT_TO_CHECK = "overfit-to-check"
    """The fix makes the visible check pass and nothing more."""
    STATE_LEAK = "state-leak"
    """State shared between calls, objects or requests that should be kept apart."""
    ENCODING = "encoding"
    """Text against bytes: byte-order marks, non-ASCII letters, Unicode normalization."""


_AGENT_TASK_PARTS = ("repo", "right", "wrong")
"""The folders of an agent task: the shipped repository, and the files of its recorded
right and plausible-wrong fixes (each replaces the repository's file of the same path)."""


def _agent_problems(folder: Path, case: Case) -> list[str]:
    if not case.verifier:
        return [f"case {case.id}: an agent case needs a verifier"]
    task = case.state.get("task", "")
    weak = case.state.get("weak_check", "")
    where = (folder / task).resolve()
    if not task or not where.is_relative_to(folder.resolve()) or where == folder.resolve():
        return [f"case {case.id}: state.task must name a task folder inside the suite"]
    problems = [
        f"case {case.id}: task {task!r} has no {part}/ folder"
        for part in _AGENT_TASK_PARTS
        if not (where / part).is_dir()
    ]
    if not weak or not (where / "repo" / weak).is_file():
        problems.append(f"case {case.id}: state.weak_check must name a file of {task}/repo")
    if case.state.get("failure_mode") not in {mode.value for mode in FailureMode}:
        known = ", ".join(mode.value for mode in FailureMode)
        problems.append(f"case {case.id}: state.failure_mode must be one of {known}")
    if not case.state.get("failure_note", "").strip():
        problems.append(f"case {case.id}: state.failure_note must say how the wrong fix fails")
    return problems


def load_suite(folder: Path) -> Suite:
    """Load and validate the suite in ``folder``.

    Raises:
        SuiteError: a file is unreadable, the suite is malformed, or any case is broken
            (every broken case is named; the suite is refused whole).
    """
    head = _read_json(folder / "suite.json")
    raw_cases = _read_json(folder / "cases.json")
    if not isinstance(head, dict) or not isinstance(raw_cases, list):
        raise SuiteError([f"{folder}: suite.json must be an object and cases.json a list"])
    labels = tuple(head.get("labels", ()))
    problems: list[str] = []
    cases: list[Case] = []
    for index, raw in enumerate(raw_cases):
        # A review smoke case has no ground truth; every other kind must be scorable.
        needs_check = head.get("kind") != SuiteKind.REVIEW.value
        case, found = _case_problems(index, raw, labels, needs_check=needs_check)
        problems.extend(found)
        if case is not None:
            cases.append(case)
    ids = [c.id for c in cases]
    problems.extend(
        f"case {i}: id used twice" for i in sorted({i for i in ids if ids.count(i) > 1})
    )
    try:
        suite = Suite.model_validate(head | {"cases": [c.model_dump() for c in cases]})
    except ValidationError as exc:
        problems.extend(f"suite: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise SuiteError(problems) from exc
    if sum(1 for arm in suite.arms if arm.baseline) != 1:
        problems.append("suite: exactly one arm must be the baseline")
    if len({arm.name for arm in suite.arms}) != len(suite.arms):
        problems.append("suite: arm names must be unique")
    if suite.kind is SuiteKind.AGENT:
        for case in suite.cases:
            problems.extend(_agent_problems(folder, case))
    if problems:
        raise SuiteError(problems)
    suite._folder = folder
    if suite.kind is SuiteKind.AGENT:
        suite._files_sha256 = _files_digest(folder, suite.cases)
    return suite


def _ours(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix != ".pyc"


def _our_files(tree: Path) -> list[Path]:
    """The files under ``tree``, in order; bytecode caches are the interpreter's, not ours."""
    return sorted(p for p in tree.rglob("*") if p.is_file() and _ours(p))


def _file_digests(tree: Path, base: Path) -> dict[str, str]:
    return {
        path.relative_to(base).as_posix(): sha256_hex(path.read_bytes())
        for path in _our_files(tree)
    }


def tree_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (path relative to it, bytes), caches aside, in order.

    The files :func:`tree_sha256` digests.
    """
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in _our_files(folder)}


def _files_digest(folder: Path, cases: tuple[Case, ...]) -> str:
    """SHA-256 over the path and bytes of every file of the cases' task folders."""
    files: dict[str, str] = {}
    for case in cases:
        files |= _file_digests(folder / case.state["task"], folder)
    return sha256_hex(canonical_json(files))


def tree_sha256(folder: Path) -> str:
    """SHA-256 over the path and bytes of every file under ``folder``, caches aside.

    Two digests of a workspace differ exactly when an agent changed its files in between.
    """
    return sha256_hex(canonical_json(_file_digests(folder, folder)))


def shipped_suites() -> dict[str, Path]:
    """The suites packaged with foureyes, by name."""
    root = Path(str(resources.files("foureyes.evals") / "suites"))
    return {p.name: p for p in sorted(root.iterdir()) if (p / "suite.json").is_file()}


def suite_path(name_or_path: str) -> Path:
    """A shipped suite's folder by name, or the folder given as a path.

    Raises:
        SuiteError: it is neither a shipped suite nor a folder.
    """
    shipped = shipped_suites()
    if name_or_path in shipped:
        return shipped[name_or_path]
    path = Path(name_or_path)
    if path.is_dir():
        return path
    raise SuiteError([f"no suite {name_or_path!r} (shipped: {', '.join(shipped)})"])
