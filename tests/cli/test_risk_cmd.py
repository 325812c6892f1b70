import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foureyes.cli.risk_cmd import app
from tests.helpers.data import require_data

runner = CliRunner()


@pytest.fixture
def risk_data() -> Path:
    return require_data("risk")


@pytest.fixture(scope="module")
def report_json() -> dict[str, Any]:
    result = runner.invoke(app, ["lexicon-report", "--data", str(require_data("risk")), "--json"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.output)
    return parsed


def test_json_report_has_rates_by_band_and_label_and_hits_by_term(
    report_json: dict[str, Any],
) -> None:
    assert report_json["ok"] is True
    summary = {(row["dataset"], row["band"]): row for row in report_json["summary"]}
    assert set(summary) == {
        ("sos1k", "high_risk"),
        ("sos1k", "distress"),
        ("sos1k", "everyday"),
        ("twitter", "high_risk"),
        ("twitter", "everyday"),
        ("sdcnl", "high_risk"),
        ("sdcnl", "distress"),
    }
    recall = summary[("sos1k", "high_risk")]
    assert recall["texts"] == 581
    assert recall["rate"] == pytest.approx(recall["escalated"] / recall["texts"], abs=1e-4)
    assert len(report_json["labels"]) == 11 + 2 + 2
    terms = {t["term"]: t for t in report_json["terms"]}
    assert terms["想死"]["category"] == "suicidal_ideation"
    assert terms["想死"]["hits"]["sos1k:4"] > 0
    assert terms["want to die"]["hits"]["twitter:0"] > 0  # the casual idiom, counted
    assert terms["lol"]["kind"] == "cue"
    totals = [t["total"] for t in report_json["terms"]]
    assert totals == sorted(totals, reverse=True)


def test_text_report_prints_the_tables(risk_data: Path) -> None:
    result = runner.invoke(app, ["lexicon-report", "--data", str(risk_data), "--top", "5"])
    assert result.exit_code == 0, result.output
    assert "high_risk" in result.output and "everyday" in result.output
    assert "s0-1" in result.output and "tw1" in result.output
    assert "想死" in result.output or "want to die" in result.output


def test_a_lexicon_directory_can_be_tried(tmp_path: Path, risk_data: Path) -> None:
    lexicon = tmp_path / "lexicon"
    shutil.copytree(Path(str(resources.files("foureyes.risk") / "lexicon")), lexicon)
    with (lexicon / "en.txt").open("a", encoding="utf-8") as handle:
        handle.write("[[hopelessness]]\n0.5  nice weather\n")
    result = runner.invoke(
        app, ["lexicon-report", "--data", str(risk_data), "--lexicon", str(lexicon), "--json"]
    )
    assert result.exit_code == 0, result.output
    terms = {t["term"]: t for t in json.loads(result.output)["terms"]}
    assert terms["nice weather"]["origin"].startswith("en.txt:")


def test_missing_data_fails_with_the_problems(tmp_path: Path) -> None:
    result = runner.invoke(app, ["lexicon-report", "--data", str(tmp_path), "--json"])
    assert result.exit_code == 1
    error = json.loads(result.output)
    assert error["ok"] is False and error["error"] == "ConfigError"
    assert any("sos1k_fold1.tsv" in p for p in error["problems"])


def test_a_malformed_lexicon_fails(tmp_path: Path) -> None:
    lexicon = tmp_path / "lexicon"
    shutil.copytree(Path(str(resources.files("foureyes.risk") / "lexicon")), lexicon)
    (lexicon / "zh.txt").write_text("[[nope]]\n", encoding="utf-8")
    result = runner.invoke(
        app, ["lexicon-report", "--data", str(tmp_path), "--lexicon", str(lexicon), "--json"]
    )
    assert result.exit_code == 1
    assert "zh.txt:1: unknown section [[nope]]" in json.loads(result.output)["problems"]
