"""The normalised overlap shared by the ensemble and the evaluation metrics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.overlap import MATCH_THRESHOLD, matches, overlap, tokens


def test_tokens_are_folded_words_and_single_han_characters() -> None:
    assert tokens("Ｔｅｓｔｓ FAIL in test_parse!") == {"tests", "fail", "in", "test", "parse"}
    assert tokens("测试失败 in parse") == {"测", "试", "失", "败", "in", "parse"}
    # Invisible characters do not split or make a word new; ligatures fold.
    assert tokens("con\u200bfig ﬁle") == {"config", "file"}
    assert tokens("  ... !!! ") == frozenset()


def test_overlap_is_the_jaccard_index_of_the_token_sets() -> None:
    # {the, tests, fail, in, test, parse} and {tests, are, failing, in, test, parse}: 4 of 8.
    assert overlap("The tests fail in test_parse.", "Tests are failing in test_parse") == 0.5
    assert overlap("Open fixture.json", "open FIXTURE.JSON") == 1.0
    assert overlap("Open fixture.json", "Delete the database") == 0.0
    assert overlap("修复解析器", "解析器有错") == pytest.approx(3 / 7)


def test_texts_without_tokens_overlap_only_when_they_fold_alike() -> None:
    assert overlap("...", " ... ") == 1.0 and overlap("...", "!!!") == 0.0
    assert overlap("", "word") == 0.0


def test_matching_uses_the_documented_threshold() -> None:
    assert MATCH_THRESHOLD == 0.5
    assert matches("The tests fail in test_parse.", "Tests are failing in test_parse")
    assert not matches("The fixture is wrong", "The parser is wrong about dates")
    assert matches("The fixture is wrong", "The parser is wrong about dates", threshold=0.3)


@given(st.text(max_size=40), st.text(max_size=40))
def test_overlap_is_symmetric_bounded_and_one_on_itself(a: str, b: str) -> None:
    assert overlap(a, b) == overlap(b, a)
    assert 0.0 <= overlap(a, b) <= 1.0
    assert overlap(a, a) == 1.0
