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
    assert report_json["signals"] == ["lexicon", "scorer", "combined"]
    assert report_json["scorer"] == "in_sample"
    summary = {
        (row["dataset"], row["band"]): row
        for row in report_json["summary"]
        if row["signal"] == "lexicon"
    }
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
    assert len(report_json["labels"]) == 3 * (11 + 2 + 2)  # per signal
    # Combined escalates whatever either signal does, per label.
    by_label: dict[tuple[str, int], dict[str, int]] = {}
    for row in report_json["labels"]:
        by_label.setdefault((row["dataset"], row["label"]), {})[row["signal"]] = row["escalated"]
    for counts in by_label.values():
        assert max(counts["lexicon"], counts["scorer"]) <= counts["combined"]
        assert counts["combined"] <= counts["lexicon"] + counts["scorer"]
    assert {row["fold"] for row in report_json["folds"]} == {1, 2, 3, 4}
    goals = {goal["key"]: goal for goal in report_json["goals"]}
    assert goals["zh_recall_grade4"]["measured"]["texts"] == 581
    assert goals["en_user_recall"]["status"] == "not_measurable"
    terms = {t["term"]: t for t in report_json["terms"]}
    assert terms["想死"]["category"] == "suicidal_ideation"
    assert terms["想死"]["hits"]["sos1k:4"] > 0
    assert terms["want to die"]["hits"]["twitter:0"] > 0  # the casual idiom, counted
    assert terms["lol"]["kind"] == "cue"
    assert terms["想死"]["source"] == "foureyes-calibration"
    assert terms["wish i were dead"]["source"] == "cssrs"
    totals = [t["total"] for t in report_json["terms"]]
    assert totals == sorted(totals, reverse=True)


def test_text_report_prints_the_tables(risk_data: Path) -> None:
    result = runner.invoke(app, ["lexicon-report", "--data", str(risk_data), "--top", "5"])
    assert result.exit_code == 0, result.output
    assert "high_risk" in result.output and "everyday" in result.output
    assert "goals of the combined screen" in result.output and "not_measurable" in result.output
    assert "in-sample" in result.output and "fold 4 is held out" in result.output
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


def _tiny_data(root: Path) -> Path:
    (root / "zh").mkdir()
    (root / "en").mkdir()
    for n in (1, 2, 3, 4):
        (root / "zh" / f"sos1k_fold{n}.tsv").write_text("comment\tmyLabel\n我想死\t5\n", "utf-8")
    (root / "en" / "twitter_suicidal_intention.csv").write_text("tweet,intention\nhi,0\n")
    (root / "en" / "sdcnl_combined.csv").write_text("title,selftext,is_suicide\nt,b,1\n")
    return root


def test_a_tiny_data_set_reports_every_signal(tmp_path: Path) -> None:
    data = _tiny_data(tmp_path)
    result = runner.invoke(app, ["lexicon-report", "--data", str(data), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["ok"] is True and body["scorer"] == "in_sample"
    zh = [r for r in body["labels"] if r["dataset"] == "sos1k"]
    assert {r["signal"] for r in zh} == {"lexicon", "scorer", "combined"}
    assert {r["texts"] for r in zh} == {4}


def test_cv_reports_the_scorer_from_its_out_of_fold_scores(tmp_path: Path) -> None:
    # An independent count: the texts' out-of-fold scores computed here, at the scorer's
    # escalate threshold of each text's language, tallied by dataset and label.
    from foureyes.risk.lexicon_report import load_risk_data
    from foureyes.risk.screen_model import default_screen_model
    from foureyes.risk.screen_train import out_of_fold_scores

    data = _tiny_data(tmp_path)
    texts = load_risk_data(data)
    model = default_screen_model()
    expected: dict[tuple[str, int], list[int]] = {}
    for text, score in zip(texts, out_of_fold_scores(texts), strict=True):
        row = expected.setdefault((text.dataset.value, text.label), [0, 0])
        row[0] += 1
        row[1] += score >= model.threshold(text.text)
    result = runner.invoke(app, ["lexicon-report", "--data", str(data), "--cv", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["scorer"] == "cross_validated"
    scorer = {
        (r["dataset"], r["label"]): [r["texts"], r["escalated"]]
        for r in body["labels"]
        if r["signal"] == "scorer"
    }
    assert scorer == expected


def test_a_data_directory_that_does_not_exist_fails_before_any_scoring(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for extra in ([], ["--cv"]):
        result = runner.invoke(app, ["lexicon-report", "--data", str(missing), "--json", *extra])
        assert result.exit_code == 1
        problems = json.loads(result.output)["problems"]
        assert len(problems) == 6 and all("cannot be read" in p for p in problems)
    result = runner.invoke(app, ["lexicon-report", "--data", str(missing)])
    assert result.exit_code == 1 and "ConfigError" in result.output


def test_a_reader_that_closes_the_pipe_early_is_not_an_error() -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "foureyes.cli", "risk", "lexicon-report"]
    process = subprocess.Popen(
        [*command, "--data", str(require_data("risk"))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()  # what `| head -1` reads, then it goes away
    process.stdout.close()
    errors = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=300) == 0, errors
    assert "Traceback" not in errors and "Error" not in errors


def test_the_report_written_to_a_file_has_one_plain_line_per_row(
    tmp_path: Path, report_json: dict[str, Any]
) -> None:
    import subprocess
    import sys

    out = tmp_path / "report.txt"
    with out.open("wb") as file:  # not a terminal: rich would wrap to 80 columns
        command = [sys.executable, "-m", "foureyes.cli", "risk", "lexicon-report"]
        done = subprocess.run(
            [*command, "--data", str(require_data("risk"))], stdout=file, check=False
        )
    assert done.returncode == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert not any(set(line) & set("│┃━─┏└…") for line in lines)
    title = next(i for i, line in enumerate(lines) if line.startswith("texts matched per lexicon"))
    header, *rows = lines[title + 1 :]
    assert header.split()[:3] == ["entry", "category", "w"]
    terms = report_json["terms"]
    assert len(rows) == len(terms)
    for line, term in zip(rows, terms, strict=True):
        assert line.startswith(term["term"] + "  ") and line.endswith(term["source"]), line
