"""A conversation's crisis state read from its recorded triages (``crisis_since``): pure."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from foureyes.risk.triage import crisis_since
from foureyes.store.assessments import StoredAssessment

T0 = dt.datetime(2026, 12, 7, 12, tzinfo=dt.UTC)
FLAGS = {"fiction": False, "quote": False, "third_party": False, "joke": False}


def _model(level: str, *, offline: bool = False, joke: bool = False) -> dict[str, Any]:
    return {"level": level, "offline": offline, "context_flags": FLAGS | {"joke": joke}}


def row(
    kind: str,
    minutes: int = 0,
) -> StoredAssessment:
    """A recorded triage of one kind, ``minutes`` after T0."""
    level, confirmed, escalate, l1 = "low", False, False, None
    if kind == "confirmed":
        level, confirmed, escalate, l1 = "critical", True, True, _model("critical")
    elif kind == "high":
        level, l1 = "high", _model("high")
    elif kind == "l0_only_escalation":  # L0 escalated, no model could read it
        escalate = True
    elif kind == "l0_false_alarm":  # L0 escalated, a model found it low
        escalate, l1 = True, _model("low")
    elif kind == "cleared":
        l1 = _model("low")
    elif kind == "flagged_low":
        l1 = _model("low", joke=True)
    elif kind == "offline_low":
        l1 = _model("low", offline=True)
    elif kind == "medium":
        level, l1 = "medium", _model("medium")
    at = T0 + dt.timedelta(minutes=minutes)
    return StoredAssessment(
        id=f"r{minutes}",
        trace_id=None,
        conversation_id="c",
        purpose="live",
        at=at,
        day=at.date(),
        text_fingerprint="f",
        status="ok",
        level=level,
        tier="L1" if l1 else "L0",
        confirmed=confirmed,
        policy="normal",
        reasons=(),
        detail={"l0": {"escalate": escalate}, "l1": l1, "l2": None, "path": None},
    )


ESCALATING = ["confirmed", "high", "l0_only_escalation"]
CLEARING = ["cleared", "l0_false_alarm"]
NEUTRAL = ["flagged_low", "offline_low", "medium", "quiet"]


def test_a_confirmed_crisis_holds_until_a_model_clears_it() -> None:
    history = [row("confirmed", 0), row("flagged_low", 1), row("medium", 2), row("offline_low", 3)]
    assert crisis_since(reversed(history)) == T0
    assert crisis_since(reversed([*history, row("cleared", 4)])) is None


def test_a_false_alarm_that_l1_read_as_low_is_no_crisis() -> None:
    assert crisis_since([row("l0_false_alarm")]) is None
    assert crisis_since([row("l0_only_escalation")]) == T0


@given(st.lists(st.sampled_from(ESCALATING + CLEARING + NEUTRAL), max_size=12))
def test_the_newest_escalated_or_clearing_turn_decides(kinds: list[str]) -> None:
    rows = [row(kind, n) for n, kind in enumerate(kinds)]
    deciding = [r for r, k in zip(rows, kinds, strict=True) if k in ESCALATING + CLEARING]
    expected = None
    if deciding and kinds[rows.index(deciding[-1])] in ESCALATING:
        expected = deciding[-1].at
    assert crisis_since(reversed(rows)) == expected
