import base64
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zlib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
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
    feature_strings,
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
    assert model.flags(strong)
    assert not model.flags(neutral)
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


@given(st.text(max_size=200))
def test_buckets_are_sorted_distinct_and_in_range(text: str) -> None:
    buckets = feature_buckets(text)
    assert buckets == sorted(set(buckets))
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
    assert manifest.cv["zh"]["recall"] >= manifest.training["target_recall"]
    assert manifest.cv["en"]["recall"] >= manifest.training["target_recall"]


@given(st.text(max_size=120))
def test_the_fast_hashing_is_crc32_of_the_feature_strings(text: str) -> None:
    expected = {
        zlib.crc32(f.encode("utf-8")) % BUCKETS for f in feature_strings(normalise(text).text)
    }
    assert feature_buckets(text) == sorted(expected)
