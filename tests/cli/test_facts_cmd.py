import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from foureyes.cli import facts_cmd
from tests.evidence._support import CATALOG_FILE, KINDS_FILE, SMUGGLED, observation_rows
from tests.helpers.simulator import RunningSimulator

runner = CliRunner()

# The command group as cli/main.py mounts it.
root = typer.Typer()
root.add_typer(facts_cmd.app, name="facts")


@root.command("version")
def _version() -> None:
    """A second command, so the group keeps its name as on the real command line."""


EXAMPLE = ["facts", "select", "--catalog", str(CATALOG_FILE), "--kinds", str(KINDS_FILE)]


def _rows() -> list[dict[str, Any]]:
    # The command runs its own event loop, so the tests are synchronous too.
    return asyncio.run(observation_rows(os.environ["FOUREYES_STORE__URL"]))


def _invoke(*args: str) -> tuple[int, Any]:
    result = runner.invoke(root, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize(
    ("locale", "description"),
    [
        ("zh-Hans", "来源记录：健身；频率：1-2。"),
        ("zh-Hant", "來源記錄：健身；頻率：1-2。"),
        ("en", "Source record: 健身; frequency: 1-2."),
    ],
)
def test_the_body_state_example_commits_offline(locale: str, description: str) -> None:
    code, body = _invoke(*EXAMPLE, "--task", "制定训练计划", "--locale", locale)
    assert code == 0 and body["ok"] and body["status"] == "committed"
    assert body["selector"]["offline"] is True and body["locale"] == locale
    accepted = {a["evidence_ref"]: a for a in body["accepted"]}
    assert accepted["ex-1"]["description"] == description
    assert set(accepted) == {"diet-1", "ex-1", "ex-2", "lab-1", "posture-1", "sleep-1"}
    rows = _rows()
    assert [(r["evidence_ref"], r["description"]) for r in rows] == [
        (a["evidence_ref"], a["description"]) for a in body["accepted"]
    ]


def _sim_config(tmp_path: Path, simulator: RunningSimulator) -> str:
    path = tmp_path / "foureyes.toml"
    path.write_text(
        f"""
[routes.sim]
kind = "openai"
base_url = "{simulator.base_url}"
model = "selector"
timeout_s = 5

[roles]
selector = "sim"
""",
        encoding="utf-8",
    )
    return str(path)


HOSTILE = {
    "selections": [
        {"kind": "exercise_pattern", "evidence_ref": "ex-1", "description": SMUGGLED},
        {"kind": "exercise_pattern", "evidence_ref": "ex-2"},
        {"kind": "report_indicator", "evidence_ref": "lab-1", "label": "高危：血糖异常"},
        {"kind": "posture_finding", "evidence_ref": "posture-1"},
        {"kind": "lifestyle_habit", "evidence_ref": "sleep-1", "severity": "high"},
        {"kind": "exercise_pattern", "evidence_ref": "note-1"},
    ]
}


@pytest.mark.parametrize("locale", ["zh-Hans", "en"])
def test_a_selector_adding_prose_is_rejected_and_its_text_never_stored(
    simulator: RunningSimulator, tmp_path: Path, locale: str
) -> None:
    simulator.load(
        {
            "models": {
                "selector": [
                    {
                        "match": "evidence_catalog",
                        "content": json.dumps(HOSTILE, ensure_ascii=False),
                    },
                    {"match": "Recorded observations", "content": "训练量不足，建议每周加练。"},
                ]
            }
        }
    )
    config = _sim_config(tmp_path, simulator)
    code, body = _invoke(*EXAMPLE, "--locale", locale, "--explain", "--config", config)
    assert code == 0 and body["status"] == "committed"
    assert body["selector"]["offline"] is False
    assert [a["evidence_ref"] for a in body["accepted"]] == ["ex-2", "posture-1"]
    assert [(r["index"], r["reason"]) for r in body["rejected"]] == [
        (0, "extra_fields"),
        (2, "extra_fields"),
        (4, "extra_fields"),
        (5, "kind_incompatible"),
    ]
    assert body["rejected"][0]["selection"] == HOSTILE["selections"][0]
    assert body["explanation"] == {
        "text": "训练量不足，建议每周加练。",
        "offline": False,
        "model_written": True,
        "persisted": False,
    }
    rows = _rows()
    assert [r["evidence_ref"] for r in rows] == ["ex-2", "posture-1"]
    stored = json.dumps(rows, default=str, ensure_ascii=False)
    for text in (SMUGGLED, "训练量不足", "高危", "high", "建议"):
        assert text not in stored
    assert len(simulator.requests()) == 2


def test_non_json_selector_output_fails_after_one_retry(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load({"models": {"selector": [{"content": "ex-1 说明训练量不足"}]}})
    code, body = _invoke(*EXAMPLE, "--config", _sim_config(tmp_path, simulator))
    assert code == 1 and body["ok"] is False
    assert body["status"] == "selector_malformed"
    assert body["selector"] == {
        "reason": "selector_malformed",
        "parse_failure": "no_json",
        "attempts": 2,
    }
    assert len(simulator.requests()) == 2
    assert _rows() == []


def test_the_human_output_shows_both_lists(simulator: RunningSimulator, tmp_path: Path) -> None:
    simulator.load({"models": {"selector": [{"content": json.dumps(HOSTILE, ensure_ascii=False)}]}})
    result = runner.invoke(root, [*EXAMPLE, "--config", _sim_config(tmp_path, simulator)])
    assert result.exit_code == 0, result.output
    assert "committed" in result.stdout and "accepted" in result.stdout
    assert "extra_fields" in result.stdout and "kind_incompatible" in result.stdout


@pytest.mark.parametrize(
    ("catalog", "kinds", "error", "fragment"),
    [
        ("missing.json", str(KINDS_FILE), "CatalogError", "does not exist"),
        ("bad.json", str(KINDS_FILE), "CatalogError", "not valid JSON"),
        ("wrong.json", str(KINDS_FILE), "CatalogError", "items.0.admissible"),
        (str(CATALOG_FILE), "missing.toml", "ConfigError", "does not exist"),
        (str(CATALOG_FILE), "bad.toml", "ConfigError", "kinds.exercise_pattern.label"),
    ],
)
def test_bad_files_are_clear_errors(
    tmp_path: Path, catalog: str, kinds: str, error: str, fragment: str
) -> None:
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    document = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    document["items"][0]["admissible"] = "yes"
    (tmp_path / "wrong.json").write_text(json.dumps(document), encoding="utf-8")
    (tmp_path / "bad.toml").write_text(
        KINDS_FILE.read_text(encoding="utf-8").replace('en = "Exercise record"\n', ""),
        encoding="utf-8",
    )
    paths = [p if Path(p).is_absolute() else str(tmp_path / p) for p in (catalog, kinds)]
    args = ["facts", "select", "--catalog", paths[0], "--kinds", paths[1]]
    code, body = _invoke(*args)
    assert code == 1 and body["ok"] is False and body["error"] == error
    assert any(fragment in p for p in body["problems"]), body["problems"]
    human = runner.invoke(root, args)
    assert human.exit_code == 1 and fragment in " ".join(human.stderr.split())


def test_a_bad_subject_is_a_usage_error() -> None:
    result = runner.invoke(root, [*EXAMPLE, "--subject", "", "--json"])
    assert result.exit_code == 2
    assert "subject" in result.output
