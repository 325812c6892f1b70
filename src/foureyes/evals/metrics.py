"""Metrics of a run, computed from its stored results: pure and synchronous.

Every arm is compared with the baseline on the cases both have a result for. A failed
pair counts as not passed (a system that answers nothing did not get the case right).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from foureyes.evals.stats import (
    Interval,
    PairedComparison,
    PowerStatement,
    cohen_kappa,
    compare_paired,
    pearson,
    power_statement,
    rate_interval,
)
from foureyes.evals.suite import SuiteKind

__all__ = [
    "ArmMetrics",
    "Contrast",
    "DEFAULT_CONTRASTS",
    "FAILED",
    "PASSED",
    "PairRecord",
    "ReviewMetrics",
    "RunMetrics",
    "TriageAgreement",
    "VERIFIER_REJECTED",
    "WRONG_LABEL",
    "compute_metrics",
    "confusion",
    "outcome_of",
]

_ELEVATED = frozenset({"high", "critical"})


@dataclass(frozen=True, slots=True)
class PairRecord:
    """One stored pair, as the metrics read it."""

    case_id: str
    """The case."""
    arm: str
    """The arm."""
    passed: bool
    """Whether it passed."""
    failed: bool
    """Whether the system produced no usable answer."""
    prediction: str | None
    """The arm's label."""
    expected: str | None
    """The case's label."""
    cost_usd: float
    """Spend."""
    latency_ms: float
    """Wall time."""
    detail: Mapping[str, Any]
    """Kind-specific facts."""
    failure: str | None = None
    """Why the pair failed (its stored reason code: ``route_failed``, ``review_timeout``,
    ``reviewer_offline``, ...), ``None`` when it did not."""
    verifier: str | None = None
    """What the case's verifier said (``passed``, ``rejected``, ...), ``None`` without one."""


PASSED = "passed"
"""The outcome of a pair that passed."""
WRONG_LABEL = "wrong_label"
"""The outcome of a pair that answered, with a label other than the case's."""
VERIFIER_REJECTED = "verifier_rejected"
"""The outcome of a pair that answered and whose verifier rejected the answer."""
FAILED = "failed"
"""The outcome of a failed pair stored without a reason (results of older releases)."""


def outcome_of(record: PairRecord) -> str:
    """Why ``record`` passed or did not, as one code (a pair counts under exactly one).

    :data:`PASSED`; a failed pair's own reason (:attr:`PairRecord.failure`, else
    :data:`FAILED`); :data:`VERIFIER_REJECTED` when its verifier rejected the answer;
    else :data:`WRONG_LABEL`, followed by the gate's reason when the pair has one
    (``wrong_label:insufficient``: the gate fell back, so a must-pass draft was blocked).
    """
    if record.passed:
        return PASSED
    if record.failed:
        return record.failure or FAILED
    verifier = record.verifier or record.detail.get("verifier")
    if verifier == "rejected":
        return VERIFIER_REJECTED
    reason = record.detail.get("reason")
    return f"{WRONG_LABEL}:{reason}" if isinstance(reason, str) and reason else WRONG_LABEL


@dataclass(frozen=True, slots=True)
class ReviewMetrics:
    """An agent suite's arm: what its reviews did, and the tokens of its pairs.

    Each rate has a percentile bootstrap interval over its own units (pairs, or packet
    items for the unique-delta rate); ``None`` when it has no unit (no packet shown, no
    review ran, ...). Token means are per pair; a reasoning or cache-read count some
    pair's endpoint did not report is left out of the mean, ``None`` when no pair has it.
    """

    reviewed: int
    """Pairs in which a review ran (or was skipped by its projection)."""
    shown: int
    """Pairs in which a packet was shown to the Primary."""
    adoption: Interval | None
    """Of the pairs shown a packet, the share whose workspace changed after it was shown
    (the Primary acted on it)."""
    adoption_precision: Interval | None
    """Of the adopted pairs, the share the verifier passed (acting on it was right)."""
    unique_delta: Interval | None
    """Of the accepted packets' items, the share that restate nothing the Primary had said
    (:func:`foureyes.core.overlap.matches` against each of its sentences; an item that
    contradicts one of them restates nothing: it is new)."""
    would_show: Interval | None
    """Observe-only: of the reviewed pairs, the share whose update would have been shown."""
    timeouts: Interval | None
    """Of all pairs, the share in which the Primary's or the reviewer's call timed out."""
    format_failures: Interval | None
    """Of the reviewed pairs, the share whose answer broke the packet contract."""
    prompt_tokens: float
    """Input tokens per pair (the Primary's and the reviewer's calls)."""
    completion_tokens: float
    """Output tokens per pair."""
    reasoning_tokens: float | None
    """Reasoning tokens per pair, of the pairs that report them."""
    cached_tokens: float | None
    """Cache-read input tokens per pair, of the pairs that report them."""
    instruction_sha256: str | None
    """The sha256 of the arm's review instruction (``None`` for an arm that reviews
    nothing)."""
    no_update: Interval | None = None
    """Of the reviewed pairs, the share whose review answered ``no_update`` (the child's
    own "nothing to add")."""
    deliberate_calls: float | None = None
    """``deliberate`` calls per pair, where the arm offered the tool (else ``None``)."""
    review_timeouts: Interval | None = None
    """Of the reviewed pairs, the share whose review missed its deadline: shown nothing,
    scored on what the Primary did (never a false diversion by itself)."""


@dataclass(frozen=True, slots=True)
class ArmMetrics:
    """One arm's numbers."""

    arm: str
    """The arm."""
    n: int
    """Cases with a result."""
    failures: int
    """Pairs that failed."""
    pass_rate: Interval
    """Share passed, with a bootstrap interval."""
    mean_cost_usd: float
    """Spend per case."""
    mean_latency_ms: float
    """Wall time per case."""
    correction_rate: float | None
    """Share of paired cases the baseline got wrong and this arm right."""
    false_diversion_rate: float | None
    """Share of paired cases the baseline got right and this arm wrong."""
    no_update_rate: float | None
    """Share of paired cases where the arm's label equals the baseline's."""
    cost_per_correction_usd: float | None
    """Extra spend over the baseline per correction; ``None`` without a correction."""
    comparison: PairedComparison | None
    """McNemar and the paired difference against the baseline (``None`` for the baseline)."""
    block_rate: float | None
    """Gate: share of must-block cases blocked."""
    false_block_rate: float | None
    """Gate: share of must-pass cases blocked."""
    critical_recall: float | None
    """Triage: share of critical cases labelled critical."""
    alert_precision: float | None
    """Triage: of cases labelled high or critical, the share that are."""
    correction_ci: Interval | None = None
    """:attr:`correction_rate` with a bootstrap interval over the paired cases."""
    false_diversion_ci: Interval | None = None
    """:attr:`false_diversion_rate` with its interval."""
    no_update_ci: Interval | None = None
    """:attr:`no_update_rate` with its interval."""
    review: ReviewMetrics | None = None
    """Agent suites: what the arm's reviews did and its tokens."""
    divergence_ci: Interval | None = None
    """Agent suites: of the paired cases, the share whose workspace ended different from
    the baseline's (the decision diverged, for better or worse)."""
    tokens_per_correction: float | None = None
    """Extra tokens (in and out) over the baseline per correction; ``None`` without one."""
    shared_prefix: int | None = None
    """Agent suites: paired cases whose run started from the baseline's very prefix
    (equal ``prefix_sha256``): the pairs that are forks, not fresh samples."""
    sample_spread: float | None = None
    """With several samples per case: the mean, over cases, of the variance of the pass
    indicator across that case's samples (0: every sample of a case agreed)."""
    outcomes: Mapping[str, int] = field(default_factory=dict)
    """The arm's pairs counted by :func:`outcome_of` (passed, each failure reason, wrong
    label, rejected by the verifier), most frequent first."""


@dataclass(frozen=True, slots=True)
class TriageAgreement:
    """How L1 and L2 agree on the cases where both gave a level."""

    n: int
    """Cases with both levels."""
    kappa: float | None
    """Cohen's kappa of their levels."""
    error_correlation: float | None
    """Correlation of their errors (1 = wrong on the same cases)."""


@dataclass(frozen=True, slots=True)
class Contrast:
    """Two arms compared directly on the cases both ran (neither need be the baseline)."""

    first: str
    """The arm whose passes count as ``arm_only``."""
    second: str
    """The arm it is compared with (``baseline_only``)."""
    comparison: PairedComparison
    """McNemar's exact test and the paired difference, ``first`` minus ``second``."""


DEFAULT_CONTRASTS: tuple[tuple[str, str], ...] = (("masked-same", "full-fork-same"),)
"""Contrasts every report shows when both arms ran: masking against the unmasked control
(the same review with nothing hidden), what masking itself adds."""


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Everything a report shows."""

    kind: SuiteKind
    """The suite's kind."""
    baseline: str
    """The baseline arm."""
    arms: tuple[ArmMetrics, ...]
    """Per arm, in the order given."""
    labels: tuple[str, ...]
    """The label set (confusion matrices' axes)."""
    confusions: Mapping[str, Mapping[str, Mapping[str, int]]]
    """Per arm: expected label to predicted label (``none`` when it gave none) to count."""
    agreement: Mapping[str, TriageAgreement]
    """Triage: per arm, L1/L2 agreement."""
    power: PowerStatement | None = None
    """What the run could detect: McNemar's exact test on the baseline's paired cases."""
    contrasts: tuple[Contrast, ...] = ()
    """Direct comparisons of pairs of arms (:data:`DEFAULT_CONTRASTS` and those asked)."""


def confusion(records: Sequence[PairRecord], labels: Sequence[str]) -> dict[str, dict[str, int]]:
    """Expected label to predicted label to count (``none`` for no prediction)."""
    table = {e: dict.fromkeys([*labels, "none"], 0) for e in labels}
    for r in records:
        if r.expected in table:
            predicted = r.prediction if r.prediction in table[r.expected] else "none"
            table[r.expected][predicted] += 1
    return table


def _share(hits: int, n: int) -> float | None:
    return hits / n if n else None


def _rate(flags: Sequence[bool], seed: int) -> Interval | None:
    """The rate of ``flags`` with the report's interval (exact where a bootstrap collapses)."""
    return rate_interval(sum(map(bool, flags)), len(flags), seed=seed)


def _mean_known(values: Sequence[Any]) -> float | None:
    known = [float(v) for v in values if isinstance(v, int | float)]
    return sum(known) / len(known) if known else None


def _review(rows: Sequence[PairRecord], base: Mapping[str, PairRecord], seed: int) -> ReviewMetrics:
    detail = [r.detail for r in rows]
    reviewed = [d for d in detail if d.get("reviewed")]
    shown = [r for r in rows if r.detail.get("shown")]
    # Adoption precision against the baseline: of the adopted pairs whose verdict the
    # packet changed, the share it changed for the better; without a baseline pair, the
    # verifier's verdict alone.
    adopted = [
        r
        for r in shown
        if r.detail.get("adopted") and (r.case_id not in base or base[r.case_id].passed != r.passed)
    ]
    offered = [d for d in detail if d.get("deliberate_calls") is not None]
    items = [
        i > int(d.get("restated", 0))
        for d in reviewed
        for i in range(1, int(d.get("items", 0)) + 1)
    ]
    would = [bool(d.get("would_show")) for d in reviewed if d.get("observe_only")]
    digests = {d.get("instruction_sha256") for d in detail} - {None}
    return ReviewMetrics(
        reviewed=len(reviewed),
        shown=len(shown),
        adoption=_rate([bool(r.detail.get("adopted")) for r in shown], seed),
        adoption_precision=_rate([r.passed for r in adopted], seed),
        unique_delta=_rate(items, seed),
        would_show=_rate(would, seed),
        timeouts=_rate(
            [bool(d.get("primary_timeout") or d.get("review_timeout")) for d in detail], seed
        ),
        format_failures=_rate([bool(d.get("format_failure")) for d in reviewed], seed),
        no_update=_rate([d.get("packet_status") == "no_update" for d in reviewed], seed),
        deliberate_calls=(
            sum(int(d["deliberate_calls"]) for d in offered) / len(offered)
            if offered and any(d["deliberate_calls"] for d in offered)
            else None
        ),
        review_timeouts=_rate([bool(d.get("review_timeout")) for d in reviewed], seed),
        prompt_tokens=sum(int(d.get("prompt_tokens", 0)) for d in detail) / len(detail),
        completion_tokens=sum(int(d.get("completion_tokens", 0)) for d in detail) / len(detail),
        reasoning_tokens=_mean_known([d.get("reasoning_tokens") for d in detail]),
        cached_tokens=_mean_known([d.get("cached_tokens") for d in detail]),
        instruction_sha256=next(iter(digests)) if len(digests) == 1 else None,
    )


def _arm(
    arm: str,
    mine: Mapping[str, PairRecord],
    base: Mapping[str, PairRecord],
    *,
    is_baseline: bool,
    seed: int,
    kind: SuiteKind,
) -> ArmMetrics:
    rows = list(mine.values())
    shared = sorted(set(mine) & set(base))
    corrections = sum(1 for c in shared if mine[c].passed and not base[c].passed)
    diversions = sum(1 for c in shared if base[c].passed and not mine[c].passed)
    same = sum(1 for c in shared if mine[c].prediction == base[c].prediction)
    extra = sum(mine[c].cost_usd - base[c].cost_usd for c in shared)
    extra_tokens = sum(_tokens_of(mine[c]) - _tokens_of(base[c]) for c in shared)
    comparison = _contrast(mine, base, seed) if not is_baseline and shared else None
    blocks = [r for r in rows if r.expected == "block"]
    passes = [r for r in rows if r.expected == "pass"]
    critical = [r for r in rows if r.expected == "critical"]
    alerts = [r for r in rows if r.prediction in _ELEVATED]
    n = len(rows)
    pass_rate = _rate([r.passed for r in rows], seed)
    assert pass_rate is not None  # an arm is only measured when it has a record
    return ArmMetrics(
        arm=arm,
        n=n,
        failures=sum(r.failed for r in rows),
        pass_rate=pass_rate,
        mean_cost_usd=sum(r.cost_usd for r in rows) / n,
        mean_latency_ms=sum(r.latency_ms for r in rows) / n,
        correction_rate=None if is_baseline else _share(corrections, len(shared)),
        false_diversion_rate=None if is_baseline else _share(diversions, len(shared)),
        no_update_rate=None if is_baseline else _share(same, len(shared)),
        cost_per_correction_usd=extra / corrections if corrections and not is_baseline else None,
        comparison=comparison,
        block_rate=_share(sum(r.prediction == "block" for r in blocks), len(blocks)),
        false_block_rate=_share(sum(r.prediction == "block" for r in passes), len(passes)),
        critical_recall=_share(sum(r.prediction == "critical" for r in critical), len(critical)),
        alert_precision=_share(sum(r.expected in _ELEVATED for r in alerts), len(alerts)),
        correction_ci=None
        if is_baseline
        else _rate([mine[c].passed and not base[c].passed for c in shared], seed),
        false_diversion_ci=None
        if is_baseline
        else _rate([base[c].passed and not mine[c].passed for c in shared], seed),
        no_update_ci=None
        if is_baseline
        else _rate([mine[c].prediction == base[c].prediction for c in shared], seed),
        review=_review(rows, base, seed) if kind is SuiteKind.AGENT else None,
        divergence_ci=(
            _rate([_end(mine[c]) != _end(base[c]) for c in shared], seed)
            if kind is SuiteKind.AGENT and not is_baseline
            else None
        ),
        tokens_per_correction=(
            extra_tokens / corrections if corrections and not is_baseline else None
        ),
        shared_prefix=(
            sum(
                1
                for c in shared
                if mine[c].detail.get("prefix_sha256")
                and mine[c].detail.get("prefix_sha256") == base[c].detail.get("prefix_sha256")
            )
            if kind is SuiteKind.AGENT
            else None
        ),
        sample_spread=_sample_spread(rows),
        outcomes=dict(
            sorted(Counter(map(outcome_of, rows)).items(), key=lambda item: (-item[1], item[0]))
        ),
    )


def _tokens_of(record: PairRecord) -> int:
    return int(record.detail.get("prompt_tokens", 0)) + int(
        record.detail.get("completion_tokens", 0)
    )


def _end(record: PairRecord) -> object:
    """What a pair's Primary left: its workspace's digest (else its verdict)."""
    return record.detail.get("end_sha256", record.passed)


def _case_of(case_id: str) -> str:
    """The case a pair id names: ``<case>#<n>`` is sample ``n`` of ``<case>``."""
    return case_id.rpartition("#")[0] or case_id


def _sample_spread(rows: Sequence[PairRecord]) -> float | None:
    cells: dict[str, list[float]] = {}
    for r in rows:
        cells.setdefault(_case_of(r.case_id), []).append(float(r.passed))
    sampled = [v for v in cells.values() if len(v) > 1]
    if not sampled:
        return None
    spreads = [sum((x - sum(v) / len(v)) ** 2 for x in v) / (len(v) - 1) for v in sampled]
    return sum(spreads) / len(spreads)


def _agreement(rows: Sequence[PairRecord]) -> TriageAgreement:
    both = [r for r in rows if r.detail.get("l1") and r.detail.get("l2")]
    l1 = [str(r.detail["l1"]) for r in both]
    l2 = [str(r.detail["l2"]) for r in both]
    e1 = [float(level != r.expected) for level, r in zip(l1, both, strict=True)]
    e2 = [float(level != r.expected) for level, r in zip(l2, both, strict=True)]
    return TriageAgreement(
        n=len(both), kappa=cohen_kappa(l1, l2), error_correlation=pearson(e1, e2)
    )


def compute_metrics(
    kind: SuiteKind,
    records: Sequence[PairRecord],
    *,
    arms: Sequence[str],
    baseline: str,
    labels: Sequence[str],
    seed: int,
    contrasts: Sequence[tuple[str, str]] = (),
) -> RunMetrics:
    """The metrics of a run's records; arms without any record are left out.

    ``contrasts`` (with :data:`DEFAULT_CONTRASTS`) name pairs of arms compared directly;
    a pair with an arm that has no record is left out.
    """
    by_arm: dict[str, dict[str, PairRecord]] = {a: {} for a in arms}
    for r in records:
        if r.arm in by_arm:
            by_arm[r.arm][r.case_id] = r
    base = by_arm.get(baseline, {})
    present = [a for a in arms if by_arm[a]]
    return RunMetrics(
        kind=kind,
        baseline=baseline,
        arms=tuple(
            _arm(a, by_arm[a], base, is_baseline=a == baseline, seed=seed, kind=kind)
            for a in present
        ),
        labels=tuple(labels),
        confusions={a: confusion(list(by_arm[a].values()), labels) for a in present},
        agreement=(
            {a: _agreement(list(by_arm[a].values())) for a in present}
            if kind is SuiteKind.TRIAGE
            else {}
        ),
        power=power_statement(len(base)) if base else None,
        contrasts=tuple(
            Contrast(first, second, _contrast(by_arm[first], by_arm[second], seed))
            for first, second in dict.fromkeys([*DEFAULT_CONTRASTS, *contrasts])
            if by_arm.get(first) and by_arm.get(second) and set(by_arm[first]) & set(by_arm[second])
        ),
    )


def _contrast(
    first: Mapping[str, PairRecord], second: Mapping[str, PairRecord], seed: int
) -> PairedComparison:
    shared = sorted(set(first) & set(second))
    return compare_paired(
        [second[c].passed for c in shared], [first[c].passed for c in shared], seed=seed
    )
