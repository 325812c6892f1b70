"""Calibration: run labelled cases through the triage and measure it against thresholds.

Cases are JSON lines (``text``, optional ``context`` turns, and ``expected_level`` or a
binary ``label``); the shared research sets (SOS-1K Weibo levels, the Twitter
suicidal-intention set, SDCNL Reddit posts) are read in their own formats. Every case
runs through the real triage on whatever route the config names (the offline engine,
``foureyes simulate``, or a real endpoint) as a ``calibration`` run, kept apart from live
records. The report has a confusion matrix per level, critical recall, alert precision,
the unknown rate, L1/L2 agreement (Cohen's kappa), cost and latency, and how often each L0
screen signal escalated the cases at risk and not at risk (with Wilson 95 % intervals); a
thresholds file turns it into a pass/fail gate.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import secrets
import sys
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from foureyes.config import read_text_file
from foureyes.core.errors import ConfigError
from foureyes.core.policy import GenerationPolicy
from foureyes.risk.assess import Turn
from foureyes.risk.l0 import L0Result
from foureyes.risk.levels import RiskLevel
from foureyes.risk.lexicon_report import Escalation, Signal, signals_of
from foureyes.risk.result import RunPurpose, TriageResult
from foureyes.risk.triage import Triage, TriageRequest

__all__ = [
    "CalibrationReport",
    "Case",
    "CaseFormat",
    "CaseTurn",
    "SignalBreakdown",
    "ThresholdCheck",
    "Thresholds",
    "cohen_kappa",
    "load_cases",
    "load_thresholds",
    "run_cases",
    "sos1k_level",
    "summarise",
    "triage_signals",
]

# The column of the confusion matrix for triages without a level.
_UNKNOWN = "unknown"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class CaseTurn(_Strict):
    """An earlier turn of a case's conversation."""

    speaker: Literal["user", "assistant"] = "user"
    """Who wrote it."""
    text: str
    """What was written."""


class Case(_Strict):
    """One labelled case: a message, its earlier turns, and what the triage should find."""

    text: str
    """The message to triage."""
    context: tuple[CaseTurn | str, ...] = ()
    """Earlier turns, oldest first; a bare string is a user turn."""
    expected_level: RiskLevel | None = None
    """The level a careful clinician would give."""
    label: Literal["risk", "no_risk"] | None = None
    """A binary label, for sets that have no levels."""
    id: str | None = None
    """The case's id in its source, for reports."""

    @model_validator(mode="after")
    def _labelled(self) -> Case:
        if self.expected_level is None and self.label is None:
            raise ValueError("a case needs expected_level or label")
        return self

    @property
    def at_risk(self) -> bool:
        """Whether the case should get resources: high or above, or labelled ``risk``."""
        if self.expected_level is not None:
            return self.expected_level.is_elevated
        return self.label == "risk"

    def turns(self) -> tuple[Turn, ...]:
        """The context as triage turns."""
        return tuple(
            Turn("user", t) if isinstance(t, str) else Turn(t.speaker, t.text) for t in self.context
        )


class CaseFormat(StrEnum):
    """The formats :func:`load_cases` reads."""

    JSONL = "jsonl"
    """One :class:`Case` object per line."""
    SOS1K = "sos1k"
    """SOS-1K Weibo TSV (``comment``, ``myLabel`` 0-10), mapped by :func:`sos1k_level`."""
    TWITTER = "twitter"
    """Twitter suicidal-intention CSV (``tweet``, ``intention`` 0/1) as binary labels."""
    SDCNL = "sdcnl"
    """SDCNL Reddit CSV (``title``, ``selftext``, ``is_suicide`` 0/1) as binary labels."""


def sos1k_level(label: int) -> RiskLevel:
    """The level of an SOS-1K urgency grade (0 to 10).

    0-1 low (everyday mood, some pain), 2-3 medium (clear or strong pain, no wish to die),
    4-5 high (wish to die, no method), 6-10 critical (a plan, a method, a date, or an
    attempt under way).

    Raises:
        ValueError: the grade is outside 0 to 10.
    """
    if not 0 <= label <= 10:
        raise ValueError(f"SOS-1K grades run from 0 to 10, got {label}")
    if label <= 1:
        return RiskLevel.LOW
    if label <= 3:
        return RiskLevel.MEDIUM
    return RiskLevel.HIGH if label <= 5 else RiskLevel.CRITICAL


def load_cases(path: Path, fmt: CaseFormat = CaseFormat.JSONL) -> list[Case]:
    """Read labelled cases; rows with no text are skipped (the sets hold a few).

    Raises:
        ConfigError: the file cannot be read, or a row is malformed (naming its line).
    """
    raw = read_text_file(path, "cases file")
    if fmt is CaseFormat.JSONL:
        return _jsonl_cases(raw, path)
    csv.field_size_limit(sys.maxsize)
    delimiter = "\t" if fmt is CaseFormat.SOS1K else ","
    rows = list(csv.DictReader(raw.splitlines(), delimiter=delimiter))
    cases = []
    for n, row in enumerate(rows, start=2):
        try:
            case = _row_case(fmt, row, n)
        except (KeyError, ValueError, ValidationError) as exc:
            raise ConfigError([f"{path}:{n}: not a {fmt.value} row: {exc}"]) from None
        if case.text.strip():
            cases.append(case)
    return cases


def _row_case(fmt: CaseFormat, row: dict[str, str], n: int) -> Case:
    if fmt is CaseFormat.SOS1K:
        return Case(text=row["comment"], expected_level=sos1k_level(int(row["myLabel"])), id=str(n))
    if fmt is CaseFormat.TWITTER:
        label = "risk" if int(row["intention"]) == 1 else "no_risk"
        return Case(text=row["tweet"], label=label, id=str(n))
    text = "\n".join(part for part in (row["title"], row["selftext"]) if part)
    label = "risk" if int(row["is_suicide"]) == 1 else "no_risk"
    return Case(text=text, label=label, id=str(n))


def _problems(exc: ValidationError) -> list[str]:
    return [
        f"{'.'.join(str(part) for part in e['loc']) or '(object)'}: {e['msg']}"
        for e in exc.errors(include_input=False, include_url=False)
    ]


def _jsonl_cases(raw: str, path: Path) -> list[Case]:
    cases, problems = [], []
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(Case.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{n}: not JSON: {exc.msg}")
        except ValidationError as exc:
            problems += [f"{path}:{n}: {p}" for p in _problems(exc)]
    if problems:
        raise ConfigError(problems)
    return cases


class Thresholds(_Strict):
    """The pass/fail gate of a calibration; an unset threshold is not checked."""

    min_critical_recall: float | None = Field(default=None, ge=0, le=1)
    """Expected-critical cases the triage must call critical."""
    min_elevated_recall: float | None = Field(default=None, ge=0, le=1)
    """At-risk cases that must get resources (policy other than normal)."""
    max_false_escalation_rate: float | None = Field(default=None, ge=0, le=1)
    """Cases not at risk that may get resources anyway."""
    min_alert_precision: float | None = Field(default=None, ge=0, le=1)
    """Confirmed cases that must be truly critical (or labelled risk)."""
    max_unknown_rate: float | None = Field(default=None, ge=0, le=1)
    """Triages that may end ``unknown``."""
    min_screen_recall: float | None = Field(default=None, ge=0, le=1)
    """At-risk cases the L0 screen (every signal combined) must escalate."""
    max_screen_false_escalation_rate: float | None = Field(default=None, ge=0, le=1)
    """Cases not at risk the L0 screen (every signal combined) may escalate."""
    min_kappa: float | None = Field(default=None, ge=-1, le=1)
    """Agreement of L1 and L2 where both ran (Cohen's kappa)."""
    max_p95_latency_ms: float | None = Field(default=None, gt=0)
    """95th percentile of a triage's wall time."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    """Total cost of the run."""


def load_thresholds(path: Path) -> Thresholds:
    """Read a thresholds file: TOML when it ends in ``.toml``, otherwise JSON.

    Raises:
        ConfigError: the file is missing, unreadable, or names an unknown threshold.
    """
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        return Thresholds.model_validate(data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError([f"thresholds file {str(path)!r}: {exc}"]) from None
    except ValidationError as exc:
        raise ConfigError([f"thresholds file: {p}" for p in _problems(exc)]) from None


async def run_cases(
    triage: Triage, cases: Sequence[Case], *, concurrency: int = 4
) -> list[TriageResult]:
    """Triage every case as a calibration run (one fresh conversation each), in order."""
    run = secrets.token_hex(4)
    gate = asyncio.Semaphore(concurrency)

    async def one(n: int, case: Case) -> TriageResult:
        async with gate:
            return await triage.assess(
                TriageRequest(
                    text=case.text,
                    conversation_id=f"calibration:{run}:{n}",
                    history=case.turns(),
                    purpose=RunPurpose.CALIBRATION,
                )
            )

    return list(await asyncio.gather(*(one(n, c) for n, c in enumerate(cases))))


def cohen_kappa(pairs: Sequence[tuple[RiskLevel, RiskLevel]]) -> float | None:
    """Cohen's kappa of two raters over the four levels.

    ``None`` when undefined: no pairs, or both raters always gave one and the same level.
    """
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(a is b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[level] * second[level] for level in RiskLevel) / (n * n)
    if math.isclose(expected, 1.0):
        return None
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True, slots=True)
class ThresholdCheck:
    """One threshold against its measured value."""

    name: str
    value: float | None
    limit: float
    passed: bool
    """False also when the value could not be measured (no cases of that kind)."""


def _ratio(hits: int, total: int) -> float | None:
    return hits / total if total else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def triage_signals(l0: L0Result) -> dict[Signal, bool]:
    """The L0 screen's signals as a triage recorded them (:func:`signals_of` of its L0)."""
    return signals_of(l0)


@dataclass(frozen=True, slots=True)
class SignalBreakdown:
    """How often one L0 screen signal escalated the cases at risk and the others."""

    signal: Signal
    at_risk: Escalation
    """Among cases at risk (:attr:`Case.at_risk`): the signal's recall."""
    not_at_risk: Escalation
    """Among the other cases: its false escalations."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``signal``, ``at_risk`` and ``not_at_risk`` counts with ``ci95``."""
        return {
            "signal": str(self.signal),
            "at_risk": self.at_risk.to_json(),
            "not_at_risk": self.not_at_risk.to_json(),
        }


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """The measures of one calibration run."""

    cases: int
    confusion: dict[str, dict[str, int]]
    """Expected level → predicted level (or ``unknown``) → count, for level-labelled cases."""
    metrics: dict[str, float | None]
    """critical_recall, elevated_recall, false_escalation_rate, screen_recall,
    screen_false_escalation_rate, alert_precision, unknown_rate, kappa, cost_usd,
    latency_p50_ms, latency_p95_ms (``None``: no cases)."""
    reasons: dict[str, int]
    """How often each suppress reason occurred."""
    signals: tuple[SignalBreakdown, ...] = ()
    """Per L0 screen signal the triages recorded (``combined`` last), its escalations."""

    def check(self, thresholds: Thresholds) -> list[ThresholdCheck]:
        """Each set threshold against its metric."""
        pairs = [
            ("min_critical_recall", "critical_recall", True),
            ("min_elevated_recall", "elevated_recall", True),
            ("max_false_escalation_rate", "false_escalation_rate", False),
            ("min_screen_recall", "screen_recall", True),
            ("max_screen_false_escalation_rate", "screen_false_escalation_rate", False),
            ("min_alert_precision", "alert_precision", True),
            ("max_unknown_rate", "unknown_rate", False),
            ("min_kappa", "kappa", True),
            ("max_p95_latency_ms", "latency_p95_ms", False),
            ("max_cost_usd", "cost_usd", False),
        ]
        checks = []
        for field, metric, is_min in pairs:
            limit = getattr(thresholds, field)
            if limit is None:
                continue
            value = self.metrics[metric]
            passed = value is not None and (value >= limit if is_min else value <= limit)
            checks.append(ThresholdCheck(field, value, limit, passed))
        return checks

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        return {
            "cases": self.cases,
            "confusion": self.confusion,
            "metrics": self.metrics,
            "reasons": self.reasons,
            "signals": [b.as_dict() for b in self.signals],
        }


def summarise(cases: Sequence[Case], results: Sequence[TriageResult]) -> CalibrationReport:
    """Measure ``results`` (in the order of ``cases``) against the cases' labels."""
    columns = [level.value for level in RiskLevel] + [_UNKNOWN]
    confusion = {level.value: dict.fromkeys(columns, 0) for level in RiskLevel}
    critical = critical_hits = at_risk = shown = calm = false_shown = 0
    confirmed = confirmed_right = unknown = 0
    for case, result in zip(cases, results, strict=True):
        predicted = _UNKNOWN if result.level is None else result.level.value
        unknown += result.level is None
        if case.expected_level is not None:
            confusion[case.expected_level.value][predicted] += 1
            if case.expected_level is RiskLevel.CRITICAL:
                critical += 1
                critical_hits += result.level is RiskLevel.CRITICAL
        resources = result.policy is not GenerationPolicy.NORMAL
        if case.at_risk:
            at_risk += 1
            shown += resources
        else:
            calm += 1
            false_shown += resources
        if result.confirmed:
            confirmed += 1
            confirmed_right += (
                case.expected_level is RiskLevel.CRITICAL
                if case.expected_level is not None
                else case.label == "risk"
            )
    signals = _breakdown(cases, results)
    combined = next(b for b in signals if b.signal is Signal.COMBINED)
    pairs = [(r.l1.level, r.l2.level) for r in results if r.l1 is not None and r.l2 is not None]
    latencies = [r.latency_ms for r in results]
    metrics = {
        "critical_recall": _ratio(critical_hits, critical),
        "elevated_recall": _ratio(shown, at_risk),
        "false_escalation_rate": _ratio(false_shown, calm),
        "screen_recall": _ratio(combined.at_risk.escalated, combined.at_risk.texts),
        "screen_false_escalation_rate": _ratio(
            combined.not_at_risk.escalated, combined.not_at_risk.texts
        ),
        "alert_precision": _ratio(confirmed_right, confirmed),
        "unknown_rate": _ratio(unknown, len(results)),
        "kappa": cohen_kappa(pairs),
        "cost_usd": sum(r.cost_usd for r in results),
        "latency_p50_ms": _percentile(latencies, 0.5),
        "latency_p95_ms": _percentile(latencies, 0.95),
    }
    reasons = Counter(reason.value for r in results for reason in r.reasons)
    return CalibrationReport(
        cases=len(results),
        confusion=confusion,
        metrics=metrics,
        reasons=dict(sorted(reasons.items())),
        signals=signals,
    )


def _breakdown(
    cases: Sequence[Case], results: Sequence[TriageResult]
) -> tuple[SignalBreakdown, ...]:
    """Each signal's escalations among the cases at risk and the others."""
    texts: Counter[bool] = Counter()
    hits: Counter[tuple[Signal, bool]] = Counter()
    seen: dict[Signal, None] = {}
    for case, result in zip(cases, results, strict=True):
        texts[case.at_risk] += 1
        for signal, on in triage_signals(result.l0).items():
            seen.setdefault(signal)
            hits[(signal, case.at_risk)] += on
    order = sorted(seen or {Signal.COMBINED: None}, key=list(Signal).index)
    return tuple(
        SignalBreakdown(
            signal,
            Escalation(texts[True], hits[(signal, True)]),
            Escalation(texts[False], hits[(signal, False)]),
        )
        for signal in order
    )
