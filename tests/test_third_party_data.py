"""Where the third-party data is (one setting) and what tests and the CLI do without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foureyes.cli.main import app
from foureyes.config import load_config
from foureyes.core.datadir import DATA_DIR_ENV, data_dir

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()

# A test module run in a child pytest: it reads one file of the data directory.
_NEEDS_DATA = """
from tests.helpers.data import require_data


def test_reads_a_trajectory():
    assert require_data("trajectories/openhands/basic.json").read_text()
"""


def test_the_variable_names_the_directory(tmp_path: Path) -> None:
    assert data_dir({DATA_DIR_ENV: str(tmp_path)}) == tmp_path.resolve()


def test_unset_it_is_shared_data_beside_the_checkout() -> None:
    assert data_dir({}) == (REPO.parent / "shared" / "data").resolve()
    assert data_dir({DATA_DIR_ENV: "  "}) == data_dir({})


def test_the_variable_is_not_read_as_a_config_key(tmp_path: Path) -> None:
    cfg = load_config(environ={DATA_DIR_ENV: str(tmp_path), "FOUREYES_GATE__MAX_CALLS": "5"})
    assert cfg.gate.max_calls == 5


def _risk_set(root: Path) -> Path:
    """The smallest valid layout of ``risk/``: one row per file."""
    risk = root / "risk"
    (risk / "zh").mkdir(parents=True)
    (risk / "en").mkdir()
    for n in (1, 2, 3, 4):
        (risk / "zh" / f"sos1k_fold{n}.tsv").write_text("comment\tmyLabel\n我不想活了\t5\n")
    (risk / "en" / "twitter_suicidal_intention.csv").write_text("tweet,intention\nhi,0\n")
    (risk / "en" / "sdcnl_combined.csv").write_text("title,selftext,is_suicide\nt,sad,1\n")
    return risk


def test_the_cli_default_reads_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    risk = _risk_set(tmp_path)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    result = runner.invoke(app, ["risk", "lexicon-report", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["data"] == str(risk)
    # Each of the six texts is counted once per signal (lexicon, scorer, combined).
    lexicon = [row for row in report["labels"] if row["signal"] == "lexicon"]
    assert sum(row["texts"] for row in lexicon) == 6


def test_the_cli_says_how_to_get_missing_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    result = runner.invoke(app, ["risk", "lexicon-report", "--json"])
    assert result.exit_code == 1
    (problem,) = json.loads(result.output)["problems"]
    assert str(tmp_path / "risk") in problem
    assert DATA_DIR_ENV in problem and "docs/data.md" in problem


def _run_child(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """Run ``_NEEDS_DATA`` in a child pytest whose data directory is empty."""
    empty = tmp_path / "empty-data"
    empty.mkdir(exist_ok=True)
    module = tmp_path / "child" / "test_needs_data.py"
    module.parent.mkdir(exist_ok=True)
    module.write_text(_NEEDS_DATA, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env |= {DATA_DIR_ENV: str(empty), "PYTHONPATH": str(REPO)}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", str(module)],
        cwd=module.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_missing_data_skips_outside_ci_and_says_how_to_get_it(tmp_path: Path) -> None:
    child = _run_child(tmp_path, ci=None)
    assert child.returncode == 0, child.stdout + child.stderr
    assert "1 skipped" in child.stdout
    assert "third-party data not found at" in child.stdout
    assert DATA_DIR_ENV in child.stdout and "docs/data.md" in child.stdout


def test_missing_data_fails_under_ci(tmp_path: Path) -> None:
    child = _run_child(tmp_path, ci="true")
    assert child.returncode == 1, child.stdout + child.stderr
    assert "1 failed" in child.stdout
    assert "CI=true: the data must be there" in child.stdout
