"""``foureyes eval list/run/report`` through the real command line, offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foureyes.cli.main import app
from foureyes.evals import RUN_ID, suite_path
from foureyes.evals.suite import load_suite

runner = CliRunner()


def _json(args: list[str]) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "foureyes.toml"
    path.write_text(
        f'[store]\nurl = "sqlite+aiosqlite:///{tmp_path}/e.db"\n'
        '[routes.strong]\nkind = "offline"\n',
        encoding="utf-8",
    )
    return path


def test_list_json_names_the_shipped_suites_with_their_arms() -> None:
    code, doc = _json(["eval", "list", "--json"])
    assert code == 0 and doc["ok"]
    suites = {s["name"]: s for s in doc["suites"]}
    assert [a["name"] for a in suites["gate"]["arms"]] == [
        "rules-only",
        "supervisor-same",
        "supervisor-strong",
    ]
    assert suites["triage"]["kind"] == "triage"
    assert sum(a["baseline"] for a in suites["triage"]["arms"]) == 1


def test_run_record_replay_resume_and_report(tmp_path: Path) -> None:
    cfg = str(_config(tmp_path))
    cassette = str(tmp_path / "c.jsonl")
    base = ["eval", "run", "gate", "-c", cfg, "--json", "--arms", "rules-only,supervisor-strong"]
    code, doc = _json([*base, "--run-id", "one", "--record", cassette])
    assert code == 0 and (doc["ran"], doc["failures"]) == (20, 0)
    code, doc = _json([*base, "--run-id", "one"])
    assert code == 0 and (doc["ran"], doc["skipped"]) == (0, 20)
    code, doc = _json([*base, "--run-id", "two", "--replay", cassette])
    assert code == 0 and doc["ran"] == 20
    code, doc = _json(["eval", "report", "two", "-c", cfg, "--out", str(tmp_path / "r"), "--json"])
    assert code == 0
    assert Path(doc["html"]).is_file() and Path(doc["markdown"]).is_file()
    assert "replay" in Path(doc["markdown"]).read_text(encoding="utf-8")


def test_bad_input_fails_with_a_json_error(tmp_path: Path) -> None:
    cfg = str(_config(tmp_path))
    code, doc = _json(["eval", "run", "gate", "-c", cfg, "--json", "--arms", "nope"])
    assert code == 1 and doc["error"] == "SuiteError" and "nope" in doc["problems"][0]
    code, doc = _json(["eval", "run", "no-such", "-c", cfg, "--json"])
    assert code == 1 and "no suite" in doc["problems"][0]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    code, doc = _json(["eval", "run", "gate", "-c", cfg, "--json", "--replay", str(empty)])
    assert code == 1 and "CassetteMiss" in doc["problems"][0]
    code, doc = _json(["eval", "report", "missing", "-c", cfg, "--json"])
    assert code == 1 and "no eval run" in doc["problems"][0]


@pytest.mark.parametrize("run_id", ["../escape", "a/b", ".hidden", "-x", "two words", "", "x" * 65])
def test_a_run_id_that_could_not_name_a_file_or_a_url_is_refused(
    tmp_path: Path, run_id: str
) -> None:
    cfg = str(_config(tmp_path))
    code, doc = _json(["eval", "run", "gate", "-c", cfg, "--json", "--run-id", run_id])
    assert code == 1 and "run id" in doc["problems"][0] and "not valid" in doc["problems"][0]
    out = tmp_path / "reports"
    code, doc = _json(["eval", "report", "-c", cfg, "--out", str(out), "--json", "--", run_id])
    assert code == 1 and "not valid" in doc["problems"][0]
    assert not out.exists() and not (tmp_path / "escape.html").exists()


@pytest.mark.parametrize("folder_name", ["my gate suite", "a-very-long-suite-folder-name-" * 3])
def test_a_suite_folder_with_spaces_or_a_long_name_gets_a_valid_default_run_id(
    tmp_path: Path, folder_name: str
) -> None:
    folder = tmp_path / folder_name
    shutil.copytree(suite_path("gate"), folder)
    cfg = str(_config(tmp_path))
    code, doc = _json(["eval", "run", str(folder), "-c", cfg, "--json", "--arms", "rules-only"])
    assert code == 0, doc
    assert RUN_ID.fullmatch(doc["run_id"])
    assert doc["run_id"].startswith(folder_name.replace(" ", "-")[:20])


def test_default_arms_are_those_the_routes_can_run_and_a_named_one_must_exist(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain.toml"
    plain.write_text(f'[store]\nurl = "sqlite+aiosqlite:///{tmp_path}/p.db"\n', encoding="utf-8")

    code, doc = _json(["eval", "run", "gate", "-c", str(plain), "--json"])

    # No "strong" route: supervisor-strong is left out, by name, and the rest run.
    assert code == 0, doc
    assert list(doc["arms_left_out"]) == ["supervisor-strong"]
    assert "'strong'" in doc["arms_left_out"]["supervisor-strong"]
    cases = len(json.loads((suite_path("gate") / "cases.json").read_text(encoding="utf-8")))
    assert doc["ran"] == 2 * cases and doc["failures"] == 0
    text = runner.invoke(app, ["eval", "run", "gate", "-c", str(plain), "--run-id", "again"])
    assert text.exit_code == 0 and "left out arm supervisor-strong" in text.output
    # The eval's gate runs are listed as eval runs, apart from chat runs.
    listed = runner.invoke(app, ["trace", "list", "-c", str(plain), "--json"])
    assert json.loads(listed.stdout)["data"] == []
    evals = runner.invoke(app, ["trace", "list", "-c", str(plain), "--purpose", "eval", "--json"])
    assert {row["kind"] for row in json.loads(evals.stdout)["data"]} == {"gate_reply"}

    code, doc = _json(
        [
            "eval",
            "run",
            "gate",
            "-c",
            str(plain),
            "--json",
            "--arms",
            "rules-only,supervisor-strong",
        ]
    )
    assert code == 1 and any("supervisor-strong" in p for p in doc["problems"])


def test_run_agent_tasks_offline_records_each_pair_and_reports(tmp_path: Path) -> None:
    cfg = str(_config(tmp_path))
    code, doc = _json(["eval", "run", "agent-tasks", "-c", cfg, "--json", "--run-id", "agent"])
    # Every arm runs (masked-strong on the offline route called strong); with no model for
    # the Primary the run is scripted (foureyes.evals.scripted), so no pair fails.
    suite = load_suite(suite_path("agent-tasks"))
    assert code == 0 and (doc["ran"], doc["failures"]) == (len(suite.cases) * len(suite.arms), 0)
    assert not doc["arms_left_out"]
    out = tmp_path / "r"
    code, doc = _json(["eval", "report", "agent", "-c", cfg, "--out", str(out), "--json"])
    text = Path(doc["markdown"]).read_text(encoding="utf-8")
    assert code == 0 and "baseline" in text and "all-turns" in text
    assert "## Reviews and tokens" in text
