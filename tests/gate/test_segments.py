"""Segment release's pure part: cutting, the cumulative digest, release only on approval."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.config import GateConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import fallback_text
from foureyes.gate.gate import decide
from foureyes.gate.segments import (
    SegmentCutter,
    SegmentGate,
    cut_segments,
    segment_sha256,
    with_continuation,
)
from tests.gate.test_gate import verdict


def test_release_is_whole_by_default_and_strict() -> None:
    assert GateConfig().release == "whole"
    assert GateConfig.model_validate({"release": "segments"}).release == ("segments")
    with pytest.raises(ValueError, match="release"):
        GateConfig.model_validate({"release": "tokens"})
    with pytest.raises(ValueError, match="segment_max_chars"):
        GateConfig.model_validate({"segment_max_chars": 5})


@pytest.mark.parametrize(
    ("text", "segments"),
    [
        ("Hello there. How are you? Fine!", ["Hello there.", " How are you?", " Fine!"]),
        ("我在这里。你愿意说说吗？好！", ["我在这里。", "你愿意说说吗？", "好！"]),
        ("line one\nline two", ["line one\n", "line two"]),
        ("Wait... what?! Yes", ["Wait...", " what?!", " Yes"]),
        ("It costs 3.5 yuan, see example.com. Ok", ["It costs 3.5 yuan, see example.com.", " Ok"]),
        ("", []),
    ],
)
def test_segments_close_at_sentence_ends_in_en_and_zh(text: str, segments: list[str]) -> None:
    assert cut_segments(text, max_chars=400) == segments


def test_a_segment_without_a_sentence_end_is_cut_at_its_bound() -> None:
    assert cut_segments("abcdefghij", max_chars=4) == ["abcd", "efgh", "ij"]


@given(
    text=st.text(alphabet=st.sampled_from(list("ab .!?。！？\n3")), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=8),
    max_chars=st.integers(min_value=1, max_value=12),
)
def test_streamed_pieces_cut_as_the_whole_text_and_join_to_it(
    text: str, cuts: list[int], max_chars: int
) -> None:
    whole = cut_segments(text, max_chars=max_chars)
    assert "".join(whole) == text
    assert all(0 < len(segment) <= max_chars for segment in whole)
    cutter = SegmentCutter(max_chars)
    streamed: list[str] = []
    bounds = [0, *sorted(c for c in cuts if c <= len(text)), len(text)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        streamed += cutter.feed(text[start:end])
    last = cutter.finish()
    assert streamed + ([last] if last else []) == whole


VERDICTS = st.sampled_from(["approve", "reject", "insufficient", "mismatch", "timeout"])


@given(
    segments=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6),
    verdicts=st.lists(VERDICTS, min_size=6, max_size=6),
)
def test_released_text_is_the_approved_prefix_bound_to_released_so_far(
    segments: list[str], verdicts: list[str]
) -> None:
    gate = SegmentGate()
    reviewed: list[str] = []
    for segment, said in zip(segments, verdicts, strict=False):
        proposal = gate.candidate(segment, role="counselor", route="r")
        reviewed.append(proposal.sha256)
        # The digest the Supervisor is shown is the released text plus the segment.
        assert proposal.sha256 == sha256_hex(gate.released + segment)
        named = sha256_hex("another text") if said == "mismatch" else proposal.sha256
        decision = decide(
            GenerationPolicy.NORMAL,
            candidate_sha256=proposal.sha256,
            findings=(),
            verdict=None
            if said == "timeout"
            else verdict("approve" if said == "mismatch" else said, digest=named),
            failure=ReasonCode.REVIEW_TIMEOUT if said == "timeout" else None,
        )
        if gate.release(segment, decision) is None:
            break
    approved = 0
    while approved < len(segments) and verdicts[approved] == "approve":
        approved += 1
    assert gate.released == "".join(segments[:approved])
    assert [step.sha256 for step in gate.steps] == reviewed[:approved]
    for step in gate.steps:
        assert step.sha256 == segment_sha256("".join(segments[: step.index]), segments[step.index])
    expected = {
        "reject": ReasonCode.REJECTED,
        "insufficient": ReasonCode.INSUFFICIENT,
        "mismatch": ReasonCode.VERDICT_MISMATCH,
        "timeout": ReasonCode.REVIEW_TIMEOUT,
    }
    assert gate.stopped == (expected[verdicts[approved]] if approved < len(segments) else None)


def test_an_approval_of_another_segment_releases_nothing_and_stops_the_gate() -> None:
    gate = SegmentGate()
    first = gate.candidate("One.", role="counselor", route="r")
    approve = decide(
        GenerationPolicy.NORMAL,
        candidate_sha256=first.sha256,
        findings=(),
        verdict=verdict(digest=first.sha256),
        failure=None,
    )
    # The approval of "One." does not release " Two." in its place.
    assert gate.release(" Two.", approve) is None
    assert gate.released == "" and gate.stopped is ReasonCode.VERDICT_MISMATCH
    with pytest.raises(UsageError):
        gate.candidate("One.", role="counselor", route="r")


def test_the_fallback_continuation_follows_released_text_after_a_blank_line() -> None:
    text = fallback_text(ReasonCode.REJECTED, Locale.ZH_HANS)
    assert with_continuation("我在这里。", text) == "我在这里。\n\n" + text
    assert with_continuation("", text) == text
