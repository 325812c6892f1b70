"""The screen report of ``foureyes risk lexicon-report``: signals, intervals, folds and goals.

Counts are checked against an independent count in the test (each text scanned and
scored here, tallied by hand), never against numbers written down.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.risk.l0 import L0Gate, Lexicon
from foureyes.risk.lexicon_report import (
    GOALS,
    HELD_OUT_FOLD,
    Band,
    Dataset,
    Escalation,
    GoalStatus,
    LabelledText,
    LexiconReport,
    ScorerMode,
    Signal,
    build_report,
    wilson,
)
from foureyes.risk.screen_model import default_screen_model

GATE = L0Gate(Lexicon.packaged())  # the lexicon alone: the scorer is its own signal
SCREEN = default_screen_model()
Z = 1.959963984540054

# --- Wilson interval ---------------------------------------------------------------------


@st.composite
def counts(draw: st.DrawFn, max_n: int = 5000) -> tuple[int, int]:
    n = draw(st.integers(min_value=1, max_value=max_n))
    return draw(st.integers(min_value=0, max_value=n)), n


@given(counts())
def test_wilson_bounds_lie_in_the_unit_interval_and_contain_the_share(kn: tuple[int, int]) -> None:
    k, n = kn
    low, high = wilson(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert low < high  # a finite sample never pins the share exactly


@given(counts(max_n=2000))
def test_wilson_bounds_solve_the_score_equation(kn: tuple[int, int]) -> None:
    # Independent of the closed form: each bound p solves (k/n - p)^2 = z^2 p (1 - p) / n.
    k, n = kn
    for bound in wilson(k, n):
        assert (k / n - bound) ** 2 == pytest.approx(Z * Z * bound * (1 - bound) / n, abs=1e-9)


@given(counts(max_n=1000), st.integers(min_value=2, max_value=50))
def test_wilson_narrows_with_more_texts_at_the_same_share(kn: tuple[int, int], factor: int) -> None:
    k, n = kn
    low, high = wilson(k, n)
    low_more, high_more = wilson(k * factor, n * factor)
    assert high_more - low_more < high - low


def test_wilson_without_texts_knows_nothing_and_refuses_impossible_counts() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    for k, n in ((3, 2), (-1, 4), (0, -1)):
        with pytest.raises(ValueError):
            wilson(k, n)


# --- the report on a synthetic labelled set ----------------------------------------------

POOL = (
    "我想死，想死",
    "我不想活了",
    "今天天气不错，和朋友去吃了火锅",
    "好累啊，作业太多",
    "i want to kill myself tonight",
    "nice weather, went hiking",
    "this exam makes me want to die lol",
    "nobody would miss me if i was gone",
    "i feel so empty and tired of everything",
    "i just cant do this anymore",
    "",
)
"""Texts that both signals flag, that only one flags, and that neither flags (checked below)."""
_ITEM = st.one_of(
    st.tuples(
        st.just(Dataset.SOS1K),
        st.integers(min_value=0, max_value=10),
        st.sampled_from(POOL),
        st.integers(min_value=1, max_value=4),
    ),
    st.tuples(
        st.sampled_from([Dataset.TWITTER, Dataset.SDCNL]),
        st.integers(min_value=0, max_value=1),
        st.sampled_from(POOL),
        st.none(),
    ),
)


def _texts(items: Sequence[tuple[Dataset, int, str, int | None]]) -> list[LabelledText]:
    return [
        LabelledText(d, label, text, "" if fold is None else f"zh/sos1k_fold{fold}.tsv")
        for d, label, text, fold in items
    ]


def _by_hand(
    texts: Sequence[LabelledText], scores: Sequence[float] | None = None
) -> list[dict[Signal, bool]]:
    """Each text's signals, computed here from the gate and the model directly."""
    out = []
    for n, t in enumerate(texts):
        lexicon = GATE.scan(t.text).escalate
        score = SCREEN.score(t.text) if scores is None else scores[n]
        scorer = score >= SCREEN.threshold(t.text)
        out.append(
            {Signal.LEXICON: lexicon, Signal.SCORER: scorer, Signal.COMBINED: lexicon or scorer}
        )
    return out


def _tally(
    texts: Sequence[LabelledText],
    signals: Sequence[dict[Signal, bool]],
    key: Callable[[LabelledText], object | None],
) -> dict[tuple[object, Signal], Escalation]:
    """Each signal's counts per ``key`` of the texts (``None``: left out)."""
    totals: Counter[object] = Counter()
    hits: Counter[tuple[object, Signal]] = Counter()
    for text, on in zip(texts, signals, strict=True):
        k = key(text)
        if k is None:
            continue
        totals[k] += 1
        for signal in Signal:
            hits[(k, signal)] += on[signal]
    return {(k, s): Escalation(n, hits[(k, s)]) for k, n in totals.items() for s in Signal}


def _flat(
    rows: Sequence[tuple[object, dict[Signal, Escalation]]],
) -> dict[tuple[object, Signal], Escalation]:
    return {(k, s): e for k, by_signal in rows for s, e in by_signal.items()}


def _band(t: LabelledText) -> Band:
    return Band.of(t.dataset, t.label)


def _check(
    report: LexiconReport, texts: list[LabelledText], signals: list[dict[Signal, bool]]
) -> None:
    assert report.signals == (Signal.LEXICON, Signal.SCORER, Signal.COMBINED)
    labels = _flat([((r.dataset, r.label), {s: r.of(s) for s in Signal}) for r in report.labels])
    assert labels == _tally(texts, signals, lambda t: (t.dataset, t.label))
    assert _flat(report.summary()) == _tally(texts, signals, lambda t: (t.dataset, _band(t)))
    assert _flat(report.languages()) == _tally(
        texts, signals, lambda t: ("zh" if t.dataset is Dataset.SOS1K else "en", _band(t))
    )
    assert _flat(report.fold_bands()) == _tally(
        texts,
        signals,
        lambda t: (
            None
            if t.dataset is not Dataset.SOS1K
            else (int(t.source.removeprefix("zh/sos1k_fold")[:1]), _band(t))
        ),
    )

    def one(keep: Callable[[LabelledText], bool]) -> Escalation | None:
        return _tally(texts, signals, lambda t: 0 if keep(t) else None).get((0, Signal.COMBINED))

    zh_fold4 = f"zh/sos1k_fold{HELD_OUT_FOLD}.tsv"
    expected = {
        "zh_recall_grade4": one(lambda t: t.dataset is Dataset.SOS1K and t.label >= 4),
        "zh_grade0_escalation": one(lambda t: t.dataset is Dataset.SOS1K and t.label == 0),
    }
    held_out = {
        "zh_recall_grade4": one(
            lambda t: t.dataset is Dataset.SOS1K and t.label >= 4 and t.source == zh_fold4
        ),
        "zh_grade0_escalation": one(
            lambda t: t.dataset is Dataset.SOS1K and t.label == 0 and t.source == zh_fold4
        ),
    }
    proxies = {
        "en_user_recall": one(lambda t: t.dataset is not Dataset.SOS1K and t.label == 1),
        "en_supporter_escalation": one(lambda t: t.dataset is not Dataset.SOS1K and t.label == 0),
    }
    targets = {"zh_recall_grade4": (0.92, True), "zh_grade0_escalation": (0.25, False)}
    for result in report.goals():
        key = result.goal.key
        if key in proxies:
            assert result.status is GoalStatus.NOT_MEASURABLE and result.measured is None
            assert result.proxy == proxies[key]
            continue
        assert result.measured == expected[key] and result.held_out == held_out[key]
        measured = expected[key]
        if measured is None:
            assert result.status is GoalStatus.NOT_MEASURABLE
            continue
        target, at_least = targets[key]
        met = measured.rate >= target if at_least else measured.rate <= target
        assert result.status is (GoalStatus.MET if met else GoalStatus.NOT_MET)


def test_the_pool_has_texts_of_every_signal_combination() -> None:
    # Without them, a report that mixed up the signals could pass the tallies below.
    kinds = {(GATE.scan(t).escalate, SCREEN.flags(t)) for t in POOL}
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}


@settings(max_examples=40, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=25))
def test_the_report_counts_each_signal_as_an_independent_tally_does(
    items: list[tuple[Dataset, int, str, int | None]],
) -> None:
    texts = _texts(items)
    report = build_report(GATE, texts, screen=SCREEN)
    assert report.scorer is ScorerMode.IN_SAMPLE
    _check(report, texts, _by_hand(texts))


@settings(max_examples=25, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=25), st.data())
def test_out_of_fold_scores_replace_the_models_own(
    items: list[tuple[Dataset, int, str, int | None]], data: st.DataObject
) -> None:
    texts = _texts(items)
    scores = data.draw(
        st.lists(st.floats(0, 1), min_size=len(texts), max_size=len(texts)), label="scores"
    )
    report = build_report(GATE, texts, screen=SCREEN, scores=scores)
    assert report.scorer is ScorerMode.CROSS_VALIDATED
    _check(report, texts, _by_hand(texts, scores))


def test_scores_need_a_screen_and_one_per_text() -> None:
    texts = _texts([(Dataset.TWITTER, 1, "i want to die", None)])
    with pytest.raises(ValueError):
        build_report(GATE, texts, scores=[0.5])
    with pytest.raises(ValueError):
        build_report(GATE, texts, screen=SCREEN, scores=[0.5, 0.5])


def test_without_a_scorer_combined_is_the_lexicon() -> None:
    texts = _texts([(Dataset.SOS1K, 5, "我想死", 4), (Dataset.SOS1K, 0, "好累", 1)])
    report = build_report(GATE, texts)
    assert report.signals == (Signal.LEXICON, Signal.COMBINED) and report.scorer is None
    for row in report.labels:
        assert row.escalated[Signal.COMBINED] == row.escalated[Signal.LEXICON]
    assert any("scorer: not run" in note for note in report.notes())


def test_goal_statuses_follow_the_measurement() -> None:
    # Every grade-4+ text escalates and so does every grade-0 text: recall met, grade 0 not.
    texts = _texts(
        [(Dataset.SOS1K, 6, "我想死，想死", 4)] * 3
        + [(Dataset.SOS1K, 0, "我想死，想死", 2)]
        + [(Dataset.TWITTER, 1, "i want to kill myself tonight", None)]
    )
    report = build_report(GATE, texts, screen=SCREEN)
    goals = {g.goal.key: g for g in report.goals()}
    assert [g.goal.key for g in report.goals()] == [g.key for g in GOALS]
    assert goals["zh_recall_grade4"].status is GoalStatus.MET
    assert goals["zh_recall_grade4"].held_out == Escalation(3, 3)
    assert goals["zh_grade0_escalation"].status is GoalStatus.NOT_MET
    assert goals["zh_grade0_escalation"].held_out is None  # no grade-0 text in fold 4
    assert goals["en_user_recall"].status is GoalStatus.NOT_MEASURABLE
    assert goals["en_user_recall"].proxy == Escalation(1, 1)
    assert goals["en_supporter_escalation"].proxy is None  # no English text not at risk
    as_json = goals["en_user_recall"].to_json()
    assert (
        as_json["proxy_meets_target"] is True and "posts, not users" in as_json["proxy_description"]
    )
    assert "held-out data" in as_json["proxy_description"]


JSON_ROW = {"signal", "texts", "escalated", "rate", "ci95"}


def test_json_keys_are_stable() -> None:
    texts = _texts(
        [(Dataset.SOS1K, 4, "我不想活了", 4), (Dataset.TWITTER, 0, "nice weather", None)]
    )
    report = build_report(GATE, texts, screen=SCREEN)
    doc = report.to_json()
    assert set(doc) == {
        "signals", "scorer", "held_out_fold", "notes", "summary", "languages", "labels",
        "folds", "goals", "terms",
    }  # fmt: skip
    assert doc["signals"] == ["lexicon", "scorer", "combined"]
    assert doc["scorer"] == "in_sample" and doc["held_out_fold"] == HELD_OUT_FOLD
    assert any("in-sample" in n and "optimistic" in n for n in doc["notes"])
    assert any("folds 1-3" in n and "fold 4 is held out" in n for n in doc["notes"])
    assert {frozenset(r) for r in doc["summary"]} == {
        frozenset(JSON_ROW | {"dataset", "language", "band"})
    }
    assert {frozenset(r) for r in doc["languages"]} == {frozenset(JSON_ROW | {"language", "band"})}
    assert {frozenset(r) for r in doc["labels"]} == {
        frozenset(JSON_ROW | {"dataset", "language", "label", "band"})
    }
    assert {frozenset(r) for r in doc["folds"]} == {frozenset(JSON_ROW | {"fold", "band"})}
    assert len(doc["summary"]) == 2 * 3  # two (dataset, band) rows, three signals each
    for goal in doc["goals"]:
        assert set(goal) == {
            "key", "description", "signal", "target", "bound", "status", "measured",
            "held_out", "proxy", "proxy_meets_target", "proxy_description",
        }  # fmt: skip
    row = doc["labels"][0]
    low, high = wilson(row["escalated"], row["texts"])
    assert row["ci95"] == [round(low, 4), round(high, 4)]
    assert math.isclose(row["rate"], row["escalated"] / row["texts"], abs_tol=1e-4)


def test_text_folds_come_from_the_sos1k_file() -> None:
    assert LabelledText(Dataset.SOS1K, 0, "x", "zh/sos1k_fold3.tsv").fold == 3
    assert LabelledText(Dataset.TWITTER, 0, "x", "en/twitter_suicidal_intention.csv").fold is None
