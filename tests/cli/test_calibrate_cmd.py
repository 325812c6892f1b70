"""``foureyes risk calibrate``: tables, JSON and the thresholds gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.test_assess_cmd import app
from tests.helpers.data import require_data

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "risk"


def calibrate(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["risk", "calibrate", *args])
    return result.exit_code, result.output


def test_offline_calibration_passes_its_thresholds_as_json() -> None:
    code, out = calibrate(
        "--cases", str(FIXTURES / "cases.jsonl"),
        "--thresholds", str(FIXTURES / "thresholds.toml"), "--json",
    )  # fmt: skip
    assert code == 0, out
    body = json.loads(out)
    assert body["ok"] is True and body["cases"] == 9
    assert body["confusion"]["critical"]["critical"] == 2
    assert [c["passed"] for c in body["checks"]] == [True] * 4
    assert [row["signal"] for row in body["signals"]] == ["lexicon", "scorer", "combined"]
    combined = body["signals"][-1]
    assert combined["at_risk"]["texts"] + combined["not_at_risk"]["texts"] == 9
    assert body["metrics"]["screen_recall"] == pytest.approx(combined["at_risk"]["rate"], abs=1e-4)


def test_a_failed_threshold_exits_one(tmp_path: Path) -> None:
    strict = tmp_path / "t.json"
    strict.write_text('{"min_alert_precision": 0.9}', encoding="utf-8")
    code, out = calibrate("--cases", str(FIXTURES / "cases.jsonl"), "--thresholds", str(strict))
    assert code == 1 and "FAIL" in out and "min_alert_precision" in out


def test_bad_cases_file_exits_one(tmp_path: Path) -> None:
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"text": "no label"}\n', encoding="utf-8")
    code, out = calibrate("--cases", str(bad), "--json")
    assert code == 1 and json.loads(out)["error"] == "ConfigError"


@pytest.mark.parametrize(
    ("path", "fmt"),
    [("risk/zh/sos1k_fold1.tsv", "sos1k"), ("risk/en/twitter_suicidal_intention.csv", "twitter")],
)
def test_calibration_runs_on_the_shared_data_and_prints_its_tables(path: str, fmt: str) -> None:
    source = require_data(path)
    code, out = calibrate("--cases", str(source), "--format", fmt, "--limit", "60")
    assert code == 0, out
    for heading in ("60 cases", "confusion", "metrics", "elevated_recall", "kappa", "L0 screen"):
        assert heading in out
