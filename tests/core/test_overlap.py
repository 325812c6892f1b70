"""The normalised overlap shared by the ensemble and the evaluation metrics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.overlap import (
    MATCH_THRESHOLD,
    Comparison,
    compare,
    matches,
    overlap,
    read,
    tokens,
)

SAME, CONTRADICTS, DIFFERENT = Comparison.SAME, Comparison.CONTRADICTS, Comparison.DIFFERENT


def test_tokens_are_folded_words_and_single_han_characters() -> None:
    assert tokens("Ｔｅｓｔｓ FAIL in test_parse!") == {"tests", "fail", "in", "test", "parse"}
    assert tokens("测试失败 in parse") == {"测", "试", "失", "败", "in", "parse"}
    # Invisible characters do not split or make a word new; ligatures fold.
    assert tokens("con\u200bfig ﬁle") == {"config", "file"}
    assert tokens("  ... !!! ") == frozenset()


def test_overlap_is_the_jaccard_index_of_the_content_token_sets() -> None:
    # "fail" and "failing" are both the reversal side of the concept "pass": one token.
    # {the, tests, pass, in, test, parse} and {tests, are, pass, in, test, parse}: 5 of 7.
    assert overlap("The tests fail in test_parse.", "Tests are failing in test_parse") == 5 / 7
    # {the, tests, open, in, parser} and {tests, are, open, in, parser}: 4 of 6.
    assert overlap("The tests open in the parser", "Tests are open in parser") == 4 / 6
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


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The fix is correct", "The fix is not correct"),
        ("The fix is correct", "The fix isn't correct"),
        ("The fix is correct", "The fix isn’t correct"),
        ("The fix is correct", "The fix is incorrect"),
        ("The fix is correct", "The fix is wrong"),
        ("The test passes", "The test fails"),
        ("The test passes", "The test does not pass"),
        ("The input is valid", "The input is invalid"),
        ("The cache is safe to share", "The cache is unsafe to share"),
        ("Delete the line", "Don't delete the line"),
        ("The lock can be dropped here", "The lock cannot be dropped here"),
        ("The parser handles empty input", "The parser fails to handle empty input"),
        ("The list is empty", "The list is non-empty"),
        ("Neither the parser nor the lexer is correct", "The parser and the lexer are correct"),
        ("修复是正确的", "修复是错误的"),
        ("修复是正确的", "修复不正确"),
        ("修复是正确的", "修复是不对的"),
        ("测试通过了", "测试失败了"),
        ("测试通过了", "测试没有通过"),
        ("这段代码是安全的", "这段代码是危险的"),
        ("修復是正確的", "修復不正確"),
        ("修復是正確的", "修復是錯誤的"),
        ("測試通過了", "測試沒有通過"),
        ("這段代碼是安全的", "這段代碼是危險的"),
        ("這個修復不錯", "這個修復不對"),
    ],
)
def test_a_negated_or_reversed_conclusion_contradicts(first: str, second: str) -> None:
    assert compare(first, second) is CONTRADICTS and compare(second, first) is CONTRADICTS
    assert not matches(first, second)
    assert overlap(first, second) >= MATCH_THRESHOLD  # about the same thing, concluded apart


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The fix is correct", "The fix is probably correct"),
        ("The fix is correct", "I think the fix might be correct"),
        ("The fix is not correct", "The fix is possibly not correct"),
        ("The test fails", "The test may fail"),
        ("修复是正确的", "修复可能是正确的"),
        ("修复是正确的", "修复也许是正确的"),
        ("修复不正确", "我觉得修复大概不正确"),
        ("修復是正確的", "修復也許是正確的"),
        ("修復是正確的", "修復或許是正確的"),
    ],
)
def test_a_hedged_restatement_is_the_same(first: str, second: str) -> None:
    assert compare(first, second) is SAME and matches(first, second)
    assert not read(first).hedged and read(second).hedged
    assert read(first).negative is read(second).negative


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The tests fail in test_parse.", "Tests are failing in test_parse"),
        ("The fix is correct", "The FIX is correct!"),
        ("The fix is incorrect", "The fix is wrong"),
        ("The test doesn't pass", "The test fails"),
        ("The fix is not incorrect", "The fix is correct"),  # a double negation
        ("It is not unsafe", "It is safe"),
        ("修复是错误的", "修复不正确"),
        ("修复不是不正确的", "修复是正确的"),
        ("修復不是不正確的", "修復是正確的"),
        ("测试没有失败", "测试通过"),
    ],
)
def test_a_restatement_is_the_same(first: str, second: str) -> None:
    assert compare(first, second) is SAME and matches(first, second)


def test_double_negation_is_positive() -> None:
    assert read("The fix is not incorrect").negations == 2
    assert not read("The fix is not incorrect").negative
    assert not read("修复不是不正确的").negative and read("修复不正确").negative
    assert not read("Nothing is wrong").negative


def test_words_that_only_look_negated_are_not_negations() -> None:
    # 不错 "not bad" is good; 不久 "soon", 不断 "continually", 不过 "but", 是否 "whether".
    assert not read("这个修复不错").negative and not read("這個修復不錯").negative
    assert compare("这个修复不错", "这个修复很好") is SAME
    assert compare("这个修复不错", "这个修复错了") is CONTRADICTS
    assert compare("我们不断地运行测试", "我们运行测试") is SAME
    for text in (
        "不久就会修复",
        "不过测试很慢",
        "检查是否安全",
        "非常慢",
        "未来再修复",
        "别人的代码",
    ):
        assert read(text).negations == 0, text
    assert compare("The fix is not only correct but fast", "The fix is correct and fast") is SAME
    assert not read("The fix is not bad").negative  # not + the reversal "bad": good


def test_negators_and_hedges_do_not_dominate_the_overlap() -> None:
    reading = read("The fix isn't probably correct")
    assert reading.content == {"the", "fix", "is", "correct"} and reading.hedged
    assert overlap("The fix is correct", "The fix is not never no correct") == 1.0
    # Negators only: no content tokens, so the plain tokens decide.
    assert overlap("not", "not") == 1.0 and overlap("not", "never") == 0.0
    assert compare("Not.", "not") is SAME and compare("no", "yes") is DIFFERENT
    # Unrelated statements are different whatever their polarity.
    assert compare("The fix is correct", "The database is not reachable") is DIFFERENT


PLAIN = st.lists(
    st.sampled_from(
        ["the", "fix", "parser", "test", "is", "correct", "passes", "returns", "value", "x1",
         "修", "复", "测", "试", "是", "正确", "通过", "的", "代", "码"]
    ),
    min_size=1,
    max_size=8,
)  # fmt: skip
NEGATORS = st.sampled_from(["not ", "never ", "no ", "不", "没有", "沒有", "無", "未"])


@given(PLAIN, NEGATORS)
def test_adding_a_negator_to_a_statement_without_one_never_yields_same(
    words: list[str], negator: str
) -> None:
    statement = " ".join(words)
    assert read(statement).negations == 0
    assert compare(statement, negator + statement) is CONTRADICTS
    assert compare(negator + statement, statement) is CONTRADICTS
    assert compare(statement, "not " + negator + statement) is SAME  # negated twice


@given(st.text(max_size=40), st.text(max_size=40))
def test_compare_is_total_symmetric_and_same_on_itself(a: str, b: str) -> None:
    assert compare(a, b) is compare(b, a)
    assert compare(a, a) is SAME and matches(a, a)
    assert matches(a, b) is (compare(a, b) is SAME)
    assert (compare(a, b) is DIFFERENT) is (overlap(a, b) < MATCH_THRESHOLD)
