import shutil
from importlib import resources
from pathlib import Path

import pytest

from foureyes.core.errors import ConfigError
from foureyes.risk._lexicon import EntryKind, L0Category, Lexicon
from foureyes.risk.l0 import ESCALATION_THRESHOLD, L0Gate

PACKAGED = Path(str(resources.files("foureyes.risk") / "lexicon"))
LEXICON = Lexicon.packaged()


def strong_keys() -> dict[str, str]:
    return {
        key: entry.term
        for key, entry in LEXICON.keys.items()
        if entry.kind is EntryKind.TERM and entry.weight >= ESCALATION_THRESHOLD
    }


def test_packaged_lexicon_compiles_with_every_category() -> None:
    terms = [e for e in LEXICON.entries if e.kind is EntryKind.TERM]
    assert {e.category for e in terms} == set(L0Category)
    assert all(0 < e.weight <= 1 for e in terms)
    assert all(e.weight == 0 and e.category is None for e in LEXICON.entries if e not in terms)
    assert {e.origin.split(":")[0] for e in LEXICON.entries} == {"en.txt", "zh.txt"}
    assert len(LEXICON.keys) > len(LEXICON.entries)  # the variants


@pytest.mark.parametrize(
    ("simplified", "traditional"),
    [
        ("自杀", "自殺"),
        ("遗书", "遺書"),
        ("离开这个世界", "離開這個世界"),
        ("跳楼", "跳樓"),
        ("活不下去", "活不下去"),
        ("安眠药", "安眠藥"),
        ("结束生命", "結束生命"),
        ("撑不下去", "撐不下去"),
        ("累赘", "累贅"),
        ("困死了", "睏死了"),
        ("并不", "並不"),
    ],
)
def test_traditional_variants_are_compiled_from_the_simplified_source(
    simplified: str, traditional: str
) -> None:
    assert LEXICON.keys[traditional] is LEXICON.keys[simplified]


@pytest.mark.parametrize(
    "text",
    ["我真的不想活了", "我想自殺", "遺書已經寫好了", "想離開這個世界", "我想燒炭", "想割腕"],
)
def test_traditional_text_escalates(text: str) -> None:
    assert L0Gate(LEXICON).scan(text).escalate


def test_mixed_script_variants_match_too() -> None:
    assert "離开这个世界" in LEXICON.keys


def test_zh_source_is_written_in_simplified() -> None:
    forms = _traditional_map()
    traditional_only = {t for ts in forms.values() for t in ts} - forms.keys()
    source = (PACKAGED / "zh.txt").read_text(encoding="utf-8")
    assert not traditional_only & set(source)


def test_apostrophe_and_spacing_variants() -> None:
    entry = LEXICON.keys["don't want to live"]
    for variant in ("don’t want to live", "dont want to live", "don t want to live"):
        assert LEXICON.keys[variant] is entry
    assert LEXICON.keys["killmyself"] is LEXICON.keys["kill myself"]


def test_only_listed_idioms_contain_a_strong_term() -> None:
    # A cue containing a strong term replaces it (docs/design.md 4: a joke never hides a
    # strong signal, so every such cue must be an idiom where the term is not there: a
    # fairground ride, a sales slogan, a news report of someone else's death).
    strong = strong_keys()
    swallowing = {
        entry.term
        for key, entry in LEXICON.keys.items()
        if entry.kind is EntryKind.CUE and any(s in key for s in strong)
    }
    assert swallowing == {
        "cut myself off",
        "想死你了",
        "想死你们了",
        "想死你啦",
        "想死我了",
        "want to die on this hill",
        "want to die on that hill",
        "跳楼机",
        "跳楼价",
        "跳楼大甩卖",
        "跳楼事件",
        "自杀事件",
        "自杀新闻",
        "自杀的消息",
    }


# --- malformed lists ----------------------------------------------------------------------


def _traditional_map() -> dict[str, tuple[str, ...]]:
    forms: dict[str, tuple[str, ...]] = {}
    for line in (PACKAGED / "zh_traditional.txt").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "=")):
            simplified, *traditional = line.split()
            forms[simplified] = tuple(traditional)
    return forms


@pytest.fixture
def lexicon_dir(tmp_path: Path) -> Path:
    target = tmp_path / "lexicon"
    shutil.copytree(PACKAGED, target)
    return target


def _append(directory: Path, name: str, text: str) -> None:
    with (directory / name).open("a", encoding="utf-8") as handle:
        handle.write(text)


def _problems(directory: Path) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as caught:
        Lexicon.load(directory)
    return caught.value.problems


def test_a_copy_of_the_packaged_lists_loads(lexicon_dir: Path) -> None:
    assert Lexicon.load(lexicon_dir).keys == LEXICON.keys


def test_missing_file(lexicon_dir: Path) -> None:
    (lexicon_dir / "en.txt").unlink()
    assert _problems(lexicon_dir) == ("en.txt: cannot be read (FileNotFoundError)",)


@pytest.mark.parametrize(
    ("addition", "problem"),
    [
        ("[[feelings]]\n0.5 sad\n", "unknown section [[feelings]]"),
        ("[[hopelessness]]\n1.5 doomed\n", "expected 'weight  term' with a weight in (0, 1]"),
        ("[[hopelessness]]\n0 doomed\n", "expected 'weight  term' with a weight in (0, 1]"),
        ("[[hopelessness]]\nhigh doomed\n", "expected 'weight  term' with a weight in (0, 1]"),
        ("[[hopelessness]]\n0.5\n", "expected 'weight  term' with a weight in (0, 1]"),
        ("[[hopelessness]]\n0.5 \u200b\u200b\n", "folds to nothing"),
        ("[[burden]]\n0.5 Want To Die\n", "repeats en.txt:"),
    ],
)
def test_malformed_entries_name_file_and_line(
    lexicon_dir: Path, addition: str, problem: str
) -> None:
    lines = len((lexicon_dir / "en.txt").read_text(encoding="utf-8").splitlines())
    _append(lexicon_dir, "en.txt", addition)
    (reported,) = _problems(lexicon_dir)
    assert reported.startswith(f"en.txt:{lines + 1}") or reported.startswith(f"en.txt:{lines + 2}")
    assert problem in reported


def test_entries_before_any_section(lexicon_dir: Path) -> None:
    text = (lexicon_dir / "en.txt").read_text(encoding="utf-8")
    (lexicon_dir / "en.txt").write_text("0.5 doomed\n" + text, encoding="utf-8")
    assert _problems(lexicon_dir) == ("en.txt:1: entry before the first section",)


def test_traditional_character_in_the_chinese_source(lexicon_dir: Path) -> None:
    _append(lexicon_dir, "zh.txt", "[[hopelessness]]\n0.5 絕望\n")
    (problem,) = _problems(lexicon_dir)
    assert "絕 is Traditional; write it in Simplified" in problem


def test_unclassified_chinese_character(lexicon_dir: Path) -> None:
    _append(lexicon_dir, "zh.txt", "[[hopelessness]]\n0.5 深渊\n")
    problems = _problems(lexicon_dir)
    assert any("深 is not in zh_traditional.txt" in p for p in problems)
    assert any("渊 is not in zh_traditional.txt" in p for p in problems)


@pytest.mark.parametrize(
    ("line", "problem"),
    [("个 個\n", "个 is listed twice"), ("鸟 鸟\n", "expected 'simplified traditional...'")],
)
def test_malformed_character_map(lexicon_dir: Path, line: str, problem: str) -> None:
    _append(lexicon_dir, "zh_traditional.txt", line)
    assert any(problem in p for p in _problems(lexicon_dir))


# --- sources ---------------------------------------------------------------------------------


def test_every_entry_names_a_cited_source() -> None:
    assert {e.source for e in LEXICON.entries} <= LEXICON.sources.keys()
    assert all(source.citation for source in LEXICON.sources.values())
    assert LEXICON.keys["wish i were dead"].source == "cssrs"
    assert LEXICON.keys["nothing to live for"].source == "is-path-warm"
    assert LEXICON.keys["kms"].source == "foureyes-calibration"


def test_a_source_line_applies_to_the_entries_after_it(lexicon_dir: Path) -> None:
    _append(lexicon_dir, "en.txt", "@source cssrs\n[[burden]]\n0.5 doomed\n")
    assert Lexicon.load(lexicon_dir).keys["doomed"].source == "cssrs"


def test_an_unknown_source_is_named(lexicon_dir: Path) -> None:
    lines = len((lexicon_dir / "en.txt").read_text(encoding="utf-8").splitlines())
    _append(lexicon_dir, "en.txt", "@source my-hunch\n[[burden]]\n0.5 doomed\n0.5 useless\n")
    assert _problems(lexicon_dir) == (
        f"en.txt:{lines + 1}: unknown source 'my-hunch' (not in sources.txt)",
    )


def test_an_entry_without_a_source_is_an_error(lexicon_dir: Path) -> None:
    text = (lexicon_dir / "zh.txt").read_text(encoding="utf-8")
    unsourced = text.replace("@source ", "# was a source: ")
    (lexicon_dir / "zh.txt").write_text(unsourced, encoding="utf-8")
    # (zh_variants.txt then names terms zh.txt no longer has: reported too.)
    problems = [p for p in _problems(lexicon_dir) if p.startswith("zh.txt")]
    assert problems and all("entry without a source" in p for p in problems)
    assert len(problems) == sum(1 for e in LEXICON.entries if e.origin.startswith("zh.txt"))


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("cssrs  Another citation\n", "source 'cssrs' is listed twice"),
        ("Bad_ID  A citation\n", "expected 'id  citation'"),
        ("lonely-id\n", "expected 'id  citation'"),
    ],
)
def test_malformed_sources(lexicon_dir: Path, line: str, problem: str) -> None:
    _append(lexicon_dir, "sources.txt", line)
    (reported,) = _problems(lexicon_dir)
    assert reported.startswith("sources.txt:") and problem in reported


def test_missing_sources_file(lexicon_dir: Path) -> None:
    (lexicon_dir / "sources.txt").unlink()
    problems = _problems(lexicon_dir)
    assert problems[0] == "sources.txt: cannot be read (FileNotFoundError)"


def test_a_gate_from_a_malformed_directory_fails(lexicon_dir: Path) -> None:
    _append(lexicon_dir, "en.txt", "[[nope]]\n")
    with pytest.raises(ConfigError):
        L0Gate.from_directory(lexicon_dir)
