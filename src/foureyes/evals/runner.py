"""The runner: every case x every arm, bounded, budgeted, resumable, reproducible.

Each pair is stored in its own transaction as soon as it finishes, so a run killed
halfway keeps exactly the pairs that finished and a rerun with the same ``run_id`` skips
them. A failure of the system under test (route down, deadline, verifier hanging) is a
stored ``failed`` result; only store failures and :class:`~foureyes.evals.CassetteMiss`
stop a run, loudly, with nothing half-written.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import platform
import re
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from foureyes.config import Config
from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import UsageError
from foureyes.evals.agent_arm import Prefixes, answer_agent_case
from foureyes.evals.arms import CaseAnswer, answer_case, arm_config
from foureyes.evals.review_arm import answer_review_case, missing_sessions
from foureyes.evals.sandbox import active_sandbox
from foureyes.evals.suite import Arm, Case, Suite, SuiteError, SuiteKind
from foureyes.evals.verify import VerifierResult, run_verifier
from foureyes.llm.provider import Provider
from foureyes.store import Store
from foureyes.store.evals import EvalResultRow

__all__ = [
    "ARM_BUDGET_EXHAUSTED",
    "EvalRunner",
    "PAIR_DEADLINE",
    "PairDone",
    "RUN_ID",
    "RunSummary",
    "check_run_id",
    "new_run_id",
    "run_facts",
]

ARM_BUDGET_EXHAUSTED = "arm_budget_exhausted"
"""Reason of a pair left unrun because its arm spent its budget."""
PAIR_DEADLINE = "pair_deadline"
"""Reason of a pair that ran past the runner's per-pair deadline."""
RUN_ID = re.compile(r"\w[\w.-]{0,63}")
"""A run id: 1 to 64 letters (of any script), digits, ``_``, ``.`` or ``-``, not starting
with ``.`` or ``-``. It names report files and travels in URL paths, so it holds no
separator, space or dot-only name."""


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is a valid :data:`RUN_ID`.

    Raises:
        UsageError: it is not.
    """
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(
            f"run id {run_id!r} is not valid: use 1 to 64 letters, digits, '_', '.' or '-', "
            "starting with a letter, a digit or '_'"
        )
    return run_id


def new_run_id(suite_name: str, now: dt.datetime) -> str:
    """A fresh :data:`RUN_ID` for a run of ``suite_name``: the name, the time, 6 hex digits.

    What a run id may not hold (a space, say) becomes ``-``, and a long name is cut so
    the whole id stays within 64 characters.
    """
    suffix = f"-{now.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    name = re.sub(r"[^\w.-]", "-", suite_name).lstrip(".-") or "suite"
    return check_run_id(name[: 64 - len(suffix)] + suffix)


@dataclass(frozen=True, slots=True)
class PairDone:
    """Progress after one pair is stored."""

    done: int
    """Pairs finished, those skipped on resume included."""
    total: int
    """Pairs in the run."""
    failures: int
    """Pairs recorded as failed so far."""
    spend_usd: float
    """Spend of the pairs finished so far."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one invocation of the runner did."""

    run_id: str
    """The run."""
    ran: int
    """Pairs run and stored now."""
    skipped: int
    """Pairs already stored, not run again."""
    failures: int
    """Failed pairs in the whole run."""
    spend_usd: float
    """Spend of the whole run."""


def _package_version() -> str:
    try:
        return version("foureyes")
    except PackageNotFoundError:
        return "unknown"


def run_facts(
    suite: Suite, arms: Sequence[Arm], config: Config, *, seed: int, mode: str
) -> dict[str, Any]:
    """The reproducibility facts stored with a run (never secrets: routes by name and model)."""
    used = sorted(config.routes)
    return {
        "arms": [arm.model_dump(mode="json") for arm in arms],
        "baseline": suite.baseline.name,
        "kind": suite.kind.value,
        "labels": list(suite.labels),
        "config_sha256": sha256_hex(canonical_json(config.model_dump(mode="json"))),
        "mode": mode,
        "python": platform.python_version(),
        "routes": {
            name: {"kind": config.routes[name].kind, "model": config.routes[name].model}
            for name in used
        },
        "seed": seed,
        "suite": suite.name,
        "suite_sha256": suite.sha256,
        "version": _package_version(),
    }


class EvalRunner:
    """Runs a suite's cases under some of its arms and stores each pair as it finishes."""

    def __init__(
        self,
        suite: Suite,
        arms: Sequence[Arm],
        *,
        config: Config,
        providers: Mapping[str, Provider],
        store: Store,
        run_id: str,
        concurrency: int = 4,
        pair_deadline_s: float = 1800.0,
        review_deadline_s: float = 300.0,
        samples: int = 1,
        seed: int = 0,
        mode: str = "live",
        data_root: Path = Path("."),
        on_progress: Callable[[PairDone], None] | None = None,
    ) -> None:
        """Prepare a run; nothing runs until :meth:`run`.

        Args:
            suite: the suite.
            arms: the arms to run (the suite's baseline should be among them for metrics).
            config: the base config each arm modifies.
            providers: one provider per route (possibly recording or replaying).
            store: where the run and its results are kept.
            run_id: the run's id; an existing run with this id is resumed.
            concurrency: pairs in flight at once.
            pair_deadline_s: longest a pair may take before it is recorded as failed;
                for an agent suite, the Primary's deadline (no call starts after it) in
                its shared prefix and again in each arm's run from it.
            review_deadline_s: agent suites: longest a review at the turn stop may take
                (a later answer is that arm's ``review_timeout``, not the pair's failure).
            samples: agent suites: how many times each case is run (each sample its own
                prefix, shared by the arms, and its own seed); a pair's case id is then
                ``<case>#<n>``.
            seed: recorded with the run and used by its statistics.
            mode: ``live``, ``record`` or ``replay`` (recorded with the run).
            data_root: the folder review cases' session files are relative to.
            on_progress: called after each pair is stored.

        Raises:
            UsageError: ``concurrency``, ``samples`` or a deadline is not positive, or
                ``run_id`` is not a valid :data:`RUN_ID`.
        """
        check_run_id(run_id)
        if concurrency < 1 or samples < 1 or pair_deadline_s <= 0 or review_deadline_s <= 0:
            raise UsageError("concurrency, samples and the deadlines must be positive")
        self.suite = suite
        """The suite run."""
        self.arms = tuple(arms)
        """The arms run."""
        self.run_id = run_id
        """The run's id."""
        self._config = config
        self._providers = providers
        self._store = store
        self._concurrency = concurrency
        self._deadline_s = pair_deadline_s
        self._review_deadline_s = review_deadline_s
        self._samples = samples
        self._prefixes = Prefixes()
        self._seed = seed
        self._mode = mode
        self._data_root = data_root
        self._on_progress = on_progress
        self._spend: dict[str, float] = defaultdict(float)
        self._done = 0
        self._failures = 0
        self._total = len(suite.cases) * samples * len(self.arms)

    async def run(self) -> RunSummary:
        """Run every pair not yet stored for this run.

        Raises:
            SuiteError: the run exists but was started over a different suite, or a review
                suite's data root or session files are missing (before anything runs).
            StoreError: the store failed.
            CassetteMiss: a replayed request is not in the cassette (the run stops).
            SandboxUnavailable: an agent suite, and the :func:`active_sandbox` cannot be
                set up (before anything runs or is stored).
        """
        missing = missing_sessions(self.suite, self.arms, self._data_root)
        if missing:
            raise SuiteError(missing)
        facts = run_facts(self.suite, self.arms, self._config, seed=self._seed, mode=self._mode)
        if self.suite.kind is SuiteKind.AGENT:
            # The Primary's commands and the verifiers run in it: refuse a run without one.
            sandbox = active_sandbox()
            await sandbox.check()
            facts["sandbox"] = sandbox.name
        facts |= {
            "samples": self._samples,
            "pair_deadline_s": self._deadline_s,
            "review_deadline_s": self._review_deadline_s,
        }
        row = await self._store.evals.start_run(
            self.run_id, suite=self.suite.name, suite_sha256=self.suite.sha256, facts=facts
        )
        if row.suite_sha256 != self.suite.sha256:
            raise SuiteError(
                [f"run {self.run_id} was started over a different version of the suite"]
            )
        if row.facts.get("sandbox", facts.get("sandbox")) != facts.get("sandbox"):
            raise SuiteError(
                [
                    f"run {self.run_id} was started with --sandbox {row.facts['sandbox']}: "
                    "resume it with the same sandbox"
                ]
            )
        stored = {(r.case_id, r.arm): r for r in await self._store.evals.results(self.run_id)}
        arm_names = {arm.name for arm in self.arms}
        for (_, arm), r in stored.items():
            if arm in arm_names:
                self._spend[arm] += float(r.record.get("cost_usd", 0.0))
                self._done += 1
                self._failures += r.status == "failed"
        todo = [
            (c, n, a)
            for c in self.suite.cases
            for n in range(1, self._samples + 1)
            for a in self.arms
            if (self._pair_id(c, n), a.name) not in stored
        ]
        gate = asyncio.Semaphore(self._concurrency)
        tasks = [asyncio.ensure_future(self._pair(gate, *pair)) for pair in todo]
        try:
            for finished in asyncio.as_completed(tasks):
                await finished
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._prefixes.close()
        return RunSummary(
            run_id=self.run_id,
            ran=len(todo),
            skipped=len(stored),
            failures=self._failures,
            spend_usd=sum(self._spend.values()),
        )

    def _pair_id(self, case: Case, sample: int) -> str:
        """The case id a pair is stored under: ``<case>#<n>`` when cases are sampled."""
        return case.id if self._samples == 1 else f"{case.id}#{sample}"

    async def _pair(self, gate: asyncio.Semaphore, case: Case, sample: int, arm: Arm) -> None:
        async with gate:
            started = time.monotonic()
            answer = await self._answer(case, sample, arm)
            verdict = None
            # An agent case's verifier ran in its workspace, inside the arm.
            if answer.failure is None and case.verifier and self.suite.kind is not SuiteKind.AGENT:
                verdict = await run_verifier(
                    case.verifier, answer.output, timeout_s=case.verifier_timeout_s
                )
            latency_ms = (time.monotonic() - started) * 1000
            row = _score(self._pair_id(case, sample), case, arm, answer, verdict, latency_ms)
            write = asyncio.ensure_future(self._store.evals.record(self.run_id, row))
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                # A finished pair is stored whole even when the run is cancelled meanwhile:
                # an interrupted write would leave the connection mid-transaction.
                await write
                raise
            self._spend[arm.name] += answer.cost_usd
            self._done += 1
            self._failures += row.status == "failed"
            if self._on_progress is not None:
                self._on_progress(
                    PairDone(self._done, self._total, self._failures, sum(self._spend.values()))
                )

    async def _answer(self, case: Case, sample: int, arm: Arm) -> CaseAnswer:
        if arm.budget_usd is not None and self._spend[arm.name] >= arm.budget_usd:
            return CaseAnswer(prediction=None, output="", failure=ARM_BUDGET_EXHAUSTED)
        # An agent pair's deadlines are its Primary's and its review's (a late review is the
        # arm's timeout, not the pair's failure); this bound only cuts a pair that hangs
        # past both runs (its prefix's and its own).
        bound = (
            self._deadline_s * 2 + 60 if self.suite.kind is SuiteKind.AGENT else self._deadline_s
        )
        try:
            async with asyncio.timeout(bound):
                if self.suite.kind is SuiteKind.AGENT:
                    return await answer_agent_case(
                        self.suite,
                        arm,
                        case,
                        config=arm_config(self._config, arm),
                        providers=self._providers,
                        store=self._store,
                        prefixes=self._prefixes,
                        sample=sample,
                        seed=self._seed * 1000 + sample if self._samples > 1 else None,
                        deadline_s=self._deadline_s,
                        review_deadline_s=self._review_deadline_s,
                        conversation_id=f"eval-{self.run_id}-{self._pair_id(case, sample)}",
                    )
                if self.suite.kind is SuiteKind.REVIEW:
                    return await answer_review_case(
                        arm,
                        case,
                        config=arm_config(self._config, arm),
                        providers=self._providers,
                        store=self._store,
                        data_root=self._data_root,
                    )
                return await answer_case(
                    self.suite.kind,
                    arm,
                    case,
                    config=self._config,
                    providers=self._providers,
                    store=self._store,
                    conversation_id=f"eval-{self.run_id}-{case.id}-{arm.name}",
                )
        except TimeoutError:
            return CaseAnswer(prediction=None, output="", failure=PAIR_DEADLINE)


def _score(
    pair_id: str,
    case: Case,
    arm: Arm,
    answer: CaseAnswer,
    verdict: VerifierResult | None,
    latency_ms: float,
) -> EvalResultRow:
    failure = answer.failure
    if verdict in (VerifierResult.TIMEOUT, VerifierResult.UNAVAILABLE):
        failure = str(verdict)
    label_ok = case.expected is None or answer.prediction == case.expected
    passed = failure is None and label_ok and verdict in (None, VerifierResult.PASSED)
    record = {
        "calls": answer.calls,
        "cost_usd": answer.cost_usd,
        "detail": dict(answer.detail),
        "expected": case.expected,
        "failure": failure,
        "latency_ms": latency_ms,
        "prediction": answer.prediction,
        "verifier": None if verdict is None else str(verdict),
    }
    return EvalResultRow(
        case_id=pair_id,
        arm=arm.name,
        status="failed" if failure else "ok",
        passed=passed,
        record=record,
    )
