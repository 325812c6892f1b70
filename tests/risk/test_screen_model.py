import base64
import csv
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from foureyes.cli.risk_cmd import app
from foureyes.core.errors import ConfigError
from foureyes.core.fold import normalise
from foureyes.risk import screen_model
from foureyes.risk.lexicon_report import DATA_FILES
from foureyes.risk.screen_model import (
    BUCKETS,
    FEATURE_VERSION,
    MANIFEST_FILE,
    WEIGHTS_FILE,
    default_screen_model,
    feature_buckets,
    load_screen_model,
)
from foureyes.risk.screen_train import train_screen
from tests.helpers.data import require_data

PACKAGED = Path(str(resources.files("foureyes.risk") / "data"))
runner = CliRunner()

_ZH_RISK = ["我不想活了", "想结束自己的生命", "活着没意思，想去死", "准备好药了，今晚就走"]
_ZH_CALM = ["今天有点累", "工作压力好大", "考试没考好很难过", "和朋友吵架了心情差"]
_EN_RISK = ["i want to end my life", "going to kill myself tonight", "i have the pills ready"]
_EN_CALM = ["this exam is killing me lol", "had a rough day at work", "my cat is so cute"]


def _write(path: Path, header: list[str], rows: list[list[str]], delimiter: str = ",") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture
def tiny_data(tmp_path: Path) -> Path:
    """A small labelled set in the layout of risk/ of the data directory (docs/data.md)."""
    root = tmp_path / "data"
    for fold in (1, 2, 3, 4):
        rows = [[f"{text}{fold}", str(5 + fold)] for text in _ZH_RISK]
        rows += [[f"{text}{fold}", str(fold - 1)] for text in _ZH_CALM]
        _write(root / f"zh/sos1k_fold{fold}.tsv", ["comment", "myLabel"], rows, "\t")
    tweets = [[f"{t} {n}", "1"] for t in _EN_RISK for n in range(3)]
    tweets += [[f"{t} {n}", "0"] for t in _EN_CALM for n in range(3)]
    _write(root / "en/twitter_suicidal_intention.csv", ["tweet", "intention"], tweets)
    posts = [["title", f"{t} again", "1"] for t in _EN_RISK]
    posts += [["title", f"{t} again", "0"] for t in _EN_CALM]
    _write(root / "en/sdcnl_combined.csv", ["title", "selftext", "is_suicide"], posts)
    return root


def _files(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in (MANIFEST_FILE, WEIGHTS_FILE)}


def test_training_is_reproducible_byte_for_byte_and_loads(tiny_data: Path, tmp_path: Path) -> None:
    first = runner.invoke(
        app, ["train-screen", "--data", str(tiny_data), "--out", str(tmp_path / "a"), "--json"]
    )
    assert first.exit_code == 0, first.output
    report: dict[str, Any] = json.loads(first.output)
    assert report["ok"] is True and set(report["thresholds"]) == {"zh", "en"}
    train_screen(tiny_data, tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    model = load_screen_model(tmp_path / "a")
    assert model.score("我不想活了") > model.score("今天有点累")
    digests = model.manifest.data
    assert digests == {
        name: hashlib.sha256((tiny_data / name).read_bytes()).hexdigest() for name in DATA_FILES
    }


def test_different_data_gives_a_different_model(tiny_data: Path, tmp_path: Path) -> None:
    train_screen(tiny_data, tmp_path / "a")
    twitter = tiny_data / "en/twitter_suicidal_intention.csv"
    twitter.write_text(twitter.read_text("utf-8") + "i am saying goodbye forever,1\n", "utf-8")
    train_screen(tiny_data, tmp_path / "b")
    assert _files(tmp_path / "a")[WEIGHTS_FILE] != _files(tmp_path / "b")[WEIGHTS_FILE]


def test_training_without_data_fails_with_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["train-screen", "--data", str(tmp_path), "--out", str(tmp_path / "o"), "--json"]
    )
    assert result.exit_code == 1
    assert "cannot be read" in result.output
    assert not (tmp_path / "o").exists()


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    target = tmp_path / "model"
    target.mkdir()
    for name in (MANIFEST_FILE, WEIGHTS_FILE):
        shutil.copy(PACKAGED / name, target / name)
    return target


def _edit_manifest(directory: Path, **changes: Any) -> None:
    path = directory / MANIFEST_FILE
    manifest = json.loads(path.read_text("utf-8"))
    manifest.update(changes)
    path.write_text(json.dumps(manifest), "utf-8")


def test_the_copied_packaged_model_loads(model_dir: Path) -> None:
    assert load_screen_model(model_dir).weights == default_screen_model().weights


@pytest.mark.parametrize("name", [MANIFEST_FILE, WEIGHTS_FILE])
def test_a_missing_file_fails_loading(model_dir: Path, name: str) -> None:
    (model_dir / name).unlink()
    with pytest.raises(ConfigError, match="cannot be read"):
        load_screen_model(model_dir)


def test_a_manifest_that_is_not_json_fails_loading(model_dir: Path) -> None:
    (model_dir / MANIFEST_FILE).write_text("{not json", "utf-8")
    with pytest.raises(ConfigError, match="not JSON"):
        load_screen_model(model_dir)


def test_a_manifest_with_an_unknown_key_fails_loading(model_dir: Path) -> None:
    _edit_manifest(model_dir, surprise=1)
    with pytest.raises(ConfigError, match="surprise"):
        load_screen_model(model_dir)


def test_another_feature_version_fails_loading(model_dir: Path) -> None:
    _edit_manifest(model_dir, feature_version=FEATURE_VERSION + 1)
    with pytest.raises(ConfigError, match="feature version"):
        load_screen_model(model_dir)


@pytest.mark.parametrize(
    ("thresholds", "problem"),
    [
        ({"zh": {"escalate": 0.5, "screened": 0.4}}, "zh and en"),
        ({"zh": {"escalate": 0.5}, "en": {"escalate": 0.5, "screened": 0.4}}, "screened"),
        (
            {"zh": {"escalate": 0.4, "screened": 0.5}, "en": {"escalate": 0.5, "screened": 0.4}},
            "must not exceed",
        ),
        ({"zh": 0.5, "en": 0.4}, "thresholds"),
        (
            {"zh": {"escalate": 1.5, "screened": 0.4}, "en": {"escalate": 0.5, "screened": 0.4}},
            "less than 1",
        ),
    ],
)
def test_thresholds_that_are_not_two_ordered_per_language_fail_loading(
    model_dir: Path, thresholds: dict[str, Any], problem: str
) -> None:
    _edit_manifest(model_dir, thresholds=thresholds)
    with pytest.raises(ConfigError, match=problem):
        load_screen_model(model_dir)


def test_weights_that_are_not_the_manifests_fail_loading(model_dir: Path) -> None:
    path = model_dir / WEIGHTS_FILE
    weights = json.loads(path.read_text("utf-8"))
    weights["bias"] += 1.0
    path.write_text(json.dumps(weights), "utf-8")
    with pytest.raises(ConfigError, match="SHA-256"):
        load_screen_model(model_dir)


def test_weights_of_the_wrong_length_fail_loading_even_with_a_matching_digest(
    model_dir: Path,
) -> None:
    path = model_dir / WEIGHTS_FILE
    weights = json.loads(path.read_text("utf-8"))
    weights["weights"] = base64.b64encode(b"\0\0" * (BUCKETS // 2)).decode()
    path.write_text(json.dumps(weights), "utf-8")
    _edit_manifest(model_dir, weights_sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    with pytest.raises(ConfigError, match="float16 weights"):
        load_screen_model(model_dir)


@pytest.mark.parametrize(
    ("strong", "neutral"),
    [
        ("I am going to kill myself tonight, I have the pills ready", "I baked bread today"),
        ("我已经写好遗书了，今晚就走", "今天去超市买了苹果和牛奶"),
    ],
)
def test_a_strong_phrase_scores_above_threshold_and_a_neutral_one_below(
    strong: str, neutral: str
) -> None:
    model = default_screen_model()
    # The lower (screened) threshold: the escalate one of zh sits high (its negatives are
    # mostly stated distress), and flags() is the escalate one.
    assert model.flags_screened(strong)
    assert not model.flags_screened(neutral) and not model.flags(neutral)
    assert model.score(strong) > model.score(neutral)


@pytest.mark.parametrize(
    "text", ["I wrote goodbye letters to my family", "I just want everything to stop forever"]
)
def test_phrasings_outside_the_lexicon_are_flagged(text: str) -> None:
    # Neither phrase is in the L0 lexicon as of this commit; the screen learned them.
    assert default_screen_model().flags(text)


@given(st.text(max_size=200))
def test_every_text_scores_strictly_between_zero_and_one(text: str) -> None:
    assert 0.0 < screen_model.score(text) < 1.0


@settings(deadline=None)  # the first call builds the fold's tables
@given(st.text(max_size=200))
def test_buckets_are_sorted_and_in_range(text: str) -> None:
    buckets = feature_buckets(text)
    assert buckets == sorted(buckets)
    assert all(0 <= b < BUCKETS for b in buckets)


def test_buckets_do_not_depend_on_the_process_hash_seed() -> None:
    text = "I want to die 我不想活了"
    script = (
        f"from foureyes.risk.screen_model import feature_buckets; print(feature_buckets({text!r}))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {f"{feature_buckets(text)}\n"}


def test_the_shipped_manifest_names_the_shared_data_it_was_trained_on() -> None:
    manifest = default_screen_model().manifest
    data = require_data("risk")
    assert manifest.data == {
        name: hashlib.sha256((data / name).read_bytes()).hexdigest() for name in DATA_FILES
    }
    for language in ("zh", "en"):
        cv, thresholds = manifest.cv[language], manifest.thresholds[language]
        assert thresholds.screened <= thresholds.escalate
        assert cv["escalate"]["false_escalation_rate"] <= manifest.training["escalate_false_rate"]
        if thresholds.screened < thresholds.escalate:
            assert cv["screened"]["recall"] >= manifest.training["target_recall"]


# A plain reimplementation of the module docstring's specification of the features
# (version 2), string by string: the fast code (numpy, memos, bytes) must agree with it.
_HAN_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
_MOD = 2**64


def _is_han(char: str) -> bool:
    return any(lo <= ord(char) <= hi for lo, hi in _HAN_RANGES)


def _reference_features(folded: str) -> list[tuple[int, int, str]]:
    """(kind, n, sequence) of every feature of ``folded``.

    The distinct Han n-grams, and the features of each distinct word.
    """
    features: list[tuple[int, int, str]] = []
    han_grams: set[tuple[int, int, str]] = set()
    words: set[str] = set()
    runs: list[tuple[str, str]] = []  # ("han" | "word" | "other", run)
    for char in folded:
        kind = "han" if _is_han(char) else "word" if char.isalnum() or char == "_" else "other"
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + char)
        else:
            runs.append((kind, char))
    for kind, run in runs:
        if kind == "han":
            for n in (1, 2, 3):
                han_grams.update((1, n, run[i : i + n]) for i in range(len(run) - n + 1))
        elif kind == "word" and run not in words:
            words.add(run)
            features.append((2, 0, run))
            padded = f" {run} "
            for n in (2, 3, 4):
                features += [(3, n, padded[i : i + n]) for i in range(len(padded) - n + 1)]
    return features + sorted(han_grams)


def _reference_bucket(kind: int, n: int, sequence: str) -> int:
    h = sum(ord(x) * pow(0x100000001B3, j, _MOD) for j, x in enumerate(sequence)) % _MOD
    z = (h + (16 * kind + n) * 0x9E3779B97F4A7C15) % _MOD
    return (((z ^ (z >> 32)) * 0xD6E8FEB86659FD93) % _MOD) >> 48


def _reference_buckets(text: str) -> list[int]:
    return sorted(_reference_bucket(*f) for f in _reference_features(normalise(text).text))


_MIXED = st.text(
    st.one_of(
        st.characters(),
        st.sampled_from("我不想活了自杀 abcxyzI'_-.,!，。0９"),
        st.characters(min_codepoint=0x3400, max_codepoint=0x9FFF),
    ),
    max_size=80,
)


@settings(deadline=None)
@given(_MIXED)
@example("⼀\ud800")  # a lone surrogate beside a Han character (found by this test)
def test_the_fast_features_are_those_of_the_specification(text: str) -> None:
    assert feature_buckets(text) == _reference_buckets(text)


@settings(deadline=None)
@given(_MIXED)
def test_the_score_sums_the_weights_of_the_specifications_features(text: str) -> None:
    model = default_screen_model()
    buckets = _reference_buckets(text)
    z = model.bias + (
        math.fsum(model.weights[b] for b in buckets) / math.sqrt(len(buckets)) if buckets else 0
    )
    assert model.score(text) == pytest.approx(1 / (1 + math.exp(-z)), rel=1e-9, abs=1e-12)
    # Twice: the second call reads what the first one remembered.
    assert model.score(text) == pytest.approx(1 / (1 + math.exp(-z)), rel=1e-9, abs=1e-12)


_SENTENCES = (
    "a quiet afternoon. ",
    "I had a rough day at work and I can't sleep. ",
    "今天下午很安静。",
    "和朋友去吃了火锅，挺开心的 ",
    "Work was long, 但是还好。",
)


@settings(deadline=None)
@given(st.sampled_from(_SENTENCES), st.integers(min_value=3, max_value=200))
def test_a_text_repeated_scores_as_the_text_twice(sentence: str, times: int) -> None:
    # Feature version 3 counts distinct words and Han n-grams: after two copies (which add
    # the n-grams across the seam) more copies add nothing, so repeating a calm sentence
    # cannot walk its score away from the bias (version 2 escalated 100 KB of one).
    model = default_screen_model()
    twice = model.score(sentence * 2)
    assert model.score(sentence * times) == pytest.approx(twice, rel=1e-9, abs=1e-12)
