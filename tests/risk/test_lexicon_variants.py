"""Homophone and pinyin variants of strong Chinese terms (zh_variants.txt, issue 14)."""

import shutil
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.errors import ConfigError
from foureyes.core.fold import normalise
from foureyes.risk._lexicon import EntryKind, Lexicon
from foureyes.risk.l0 import ESCALATION_THRESHOLD, L0Gate

PACKAGED = Path(str(resources.files("foureyes.risk") / "lexicon"))
LEXICON = Lexicon.packaged()
GATE = L0Gate(LEXICON)


def _variant_rows() -> list[tuple[str, str]]:
    rows = []
    for line in (PACKAGED / "zh_variants.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            variant, _, term = line.rpartition("  ")
            rows.append((variant, term))
    return rows


VARIANTS = _variant_rows()
STRONG_ZH = sorted(
    e.term
    for e in LEXICON.entries
    if e.kind is EntryKind.TERM and e.weight >= ESCALATION_THRESHOLD and e.origin[:6] == "zh.txt"
)


@pytest.fixture(scope="module")
def without_variants(tmp_path_factory: pytest.TempPathFactory) -> L0Gate:
    target = tmp_path_factory.mktemp("lexicon") / "lexicon"
    shutil.copytree(PACKAGED, target)
    (target / "zh_variants.txt").write_text("", encoding="utf-8")
    return L0Gate.from_directory(target)


def test_variants_are_compiled_to_their_strong_term() -> None:
    assert len(VARIANTS) > 100
    for variant, _ in VARIANTS:
        entry = LEXICON.keys[normalise(variant).text.strip()]
        assert entry.weight >= ESCALATION_THRESHOLD and entry.term in STRONG_ZH


@pytest.mark.parametrize("text", ["我想自刹", "我想zisha了", "想 zi sha", "字杀吧", "Z I S H A"])
def test_homophone_and_pinyin_forms_escalate(text: str) -> None:
    assert GATE.scan(text).escalate


def test_an_ambiguous_reading_is_left_out() -> None:
    # xiangsi is 相思 (longing) as well as 想死: pypinyin's phrase dictionary has both.
    assert "xiangsi" not in LEXICON.keys and "xiang si" not in LEXICON.keys
    assert not GATE.scan("我好xiangsi你").escalate


# Filler: CJK characters that are in no negation or cue (so they cannot lower a term).
_DAMPERS = {
    c for e in LEXICON.entries if e.kind is not EntryKind.TERM for c in e.term if c >= "\u4e00"
}
_FILLER = st.text(
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF).filter(lambda c: c not in _DAMPERS),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(row=st.sampled_from(VARIANTS), before=_FILLER, after=_FILLER)
def test_a_variant_in_any_cjk_text_escalates(row: tuple[str, str], before: str, after: str) -> None:
    variant, _ = row
    assert GATE.scan(before + variant + after).escalate


@settings(max_examples=300, deadline=None)
@given(term=st.sampled_from(STRONG_ZH), before=_FILLER, after=_FILLER)
def test_a_strong_term_in_any_cjk_text_escalates(term: str, before: str, after: str) -> None:
    assert GATE.scan(before + term + after).escalate


_ANY_TEXT = st.text(
    st.sampled_from(sorted({c for v, t in VARIANTS for c in v + t} | set(" ,.不哈我想了")))
    | st.characters(min_codepoint=0x20, max_codepoint=0x9FFF),
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(text=_ANY_TEXT)
def test_variants_only_add(text: str, without_variants: L0Gate) -> None:
    with_variants, plain = GATE.scan(text), without_variants.scan(text)
    assert with_variants.escalate >= plain.escalate
    assert with_variants.score >= plain.score - 1e-9
    folded = normalise(text).text
    if not any(normalise(v).text.strip() in folded for v, _ in VARIANTS):
        assert with_variants == plain


# --- malformed variant lists ----------------------------------------------------------------


@pytest.fixture
def lexicon_dir(tmp_path: Path) -> Path:
    target = tmp_path / "lexicon"
    shutil.copytree(PACKAGED, target)
    return target


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("绝忘  绝望\n", "'绝望' is not a strong term of zh.txt"),  # weight 0.5
        ("某某  没有这个词\n", "'没有这个词' is not a strong term of zh.txt"),
        ("\u200b  自杀\n", "folds to nothing"),
    ],
)
def test_malformed_variants(lexicon_dir: Path, line: str, problem: str) -> None:
    with (lexicon_dir / "zh_variants.txt").open("a", encoding="utf-8") as handle:
        handle.write(line)
    with pytest.raises(ConfigError) as caught:
        Lexicon.load(lexicon_dir)
    (reported,) = caught.value.problems
    assert reported.startswith("zh_variants.txt:") and problem in reported


def test_a_variant_never_replaces_a_listed_key(lexicon_dir: Path) -> None:
    # 想死 is a key of its own; a variant line naming it for another term changes nothing.
    with (lexicon_dir / "zh_variants.txt").open("a", encoding="utf-8") as handle:
        handle.write("想死  自杀\n")
    assert Lexicon.load(lexicon_dir).keys["想死"].term == "想死"
