"""``foureyes assess``: one text or a JSONL file, offline and through ``foureyes simulate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from foureyes.cli import assess_cmd, calibrate_cmd
from tests.helpers.answers import answer
from tests.helpers.simulator import RunningSimulator

runner = CliRunner()

# The commands as cli/main.py wires them: ``assess`` and the ``risk`` group.
app = typer.Typer()
app.command("assess")(assess_cmd.assess)
risk = typer.Typer()
risk.command("calibrate")(calibrate_cmd.calibrate)
app.add_typer(risk, name="risk")

PLAN_EN = "I wrote my suicide note and bought a rope"
PLAN_ZH = "我已经写好遗书了，明天就去跳楼"


def assess(*args: str) -> tuple[int, Any]:
    result = runner.invoke(app, ["assess", *args, "--json"])
    body = json.loads(result.output) if result.output.strip().startswith("{") else result.output
    return result.exit_code, body


@pytest.mark.parametrize(
    ("text", "level", "categories", "locale"),
    [
        (PLAN_EN, "critical", ["farewell", "plan_means"], "en"),
        (PLAN_ZH, "critical", ["farewell", "plan_means"], "zh-Hans"),
        ("我真的不想活了", "high", ["suicidal_ideation"], "zh-Hans"),
    ],
)
def test_offline_assess_prints_the_full_result(
    text: str, level: str, categories: list[str], locale: str
) -> None:
    code, body = assess(text)
    assert code == 0, body
    assert body["ok"] is True and body["status"] == "ok" and body["level"] == level
    assert body["confirmed"] is False and body["tier"] == "L2" and body["locale"] == locale
    assert body["policy"] == "restricted" and body["reasons"] == []
    assert body["l0"]["escalate"] is True and body["l0"]["categories"] == categories
    match = body["l0"]["matches"][0]
    assert text[match["start"] : match["end"]] and match["term"]
    assert body["l1"]["offline"] and body["l2"]["offline"] and body["l1"]["evidence"]
    assert body["resources"]  # rendered by code from the registry
    assert body["assessment_id"] and body["trace_id"]


def test_calm_text_stays_at_l0_without_resources() -> None:
    code, body = assess("今天天气不错")
    assert code == 0 and body["level"] == "low" and body["tier"] == "L0"
    assert body["l1"] is None and "resources" not in body and body["policy"] == "normal"


def test_human_output() -> None:
    result = runner.invoke(app, ["assess", PLAN_EN, "--conversation-id", "c-9"])
    assert result.exit_code == 0, result.output
    for word in ("status", "critical", "restricted", "plan_means", "evidence: offline lexicon"):
        assert word in result.output


def test_a_jsonl_file_is_triaged_line_by_line_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    lines = [
        json.dumps({"text": PLAN_EN}),
        json.dumps({"text": PLAN_ZH, "conversation_id": "zh-1"}, ensure_ascii=False),
        "",
        "{not json",
        json.dumps({"conversation_id": "no-text"}),
        json.dumps({"text": "a calm day"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["assess", "--file", str(path), "--json"])
    assert result.exit_code == 1  # two malformed lines
    out = [json.loads(line) for line in result.output.splitlines()]
    assert [o["line"] for o in out] == [1, 2, 4, 5, 6]
    assert [o["ok"] for o in out] == [True, True, False, False, True]
    assert out[0]["level"] == "critical" and out[1]["conversation_id"] == "zh-1"
    assert "not JSON" in out[2]["error"] and "text" in out[3]["error"]
    assert out[4]["level"] == "low"
    human = runner.invoke(app, ["assess", "--file", str(path)])
    assert human.exit_code == 1 and "line 1: ok critical tier L2" in human.output


def test_a_clean_file_exits_zero(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"text": "hello"}) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["assess", "--file", str(path), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["status"] == "ok"


@pytest.mark.parametrize("args", [[], ["text", "--file", "x.jsonl"]])
def test_text_or_file_exactly(args: list[str]) -> None:
    assert runner.invoke(app, ["assess", *args]).exit_code == 2


def test_failures_of_the_command_exit_one(tmp_path: Path) -> None:
    code, body = assess("--file", str(tmp_path / "missing.jsonl"))
    assert code == 1 and body["ok"] is False and "cannot read" in body["problems"][0]
    bad = tmp_path / "bad.toml"
    bad.write_text("[risk]\nconfirm_confidence = 0.2\n", encoding="utf-8")
    code, body = assess("hi", "--config", str(bad))
    assert code == 1 and body["error"] == "ConfigError"


# --- through the real simulator -------------------------------------------------------------


def simulated(simulator: RunningSimulator, tmp_path: Path, timeout_s: float = 3) -> Path:
    path = tmp_path / "foureyes.toml"
    path.write_text(
        f"""
[routes.l1]
kind = "openai"
base_url = "{simulator.base_url}"
model = "risk-l1"
timeout_s = {timeout_s}

[routes.l2]
kind = "openai"
base_url = "{simulator.base_url}"
model = "risk-l2"
timeout_s = {timeout_s}

[roles]
risk_l1 = "l1"
risk_l2 = "l2"
""",
        encoding="utf-8",
    )
    return path


def scenario(l1: list[dict[str, Any]], l2: list[dict[str, Any]]) -> dict[str, Any]:
    return {"models": {"risk-l1": l1, "risk-l2": l2}}


@pytest.mark.parametrize("text", [PLAN_EN, PLAN_ZH])
def test_a_confirmed_crisis_through_the_simulator_and_l2_is_blind(
    text: str, simulator: RunningSimulator, tmp_path: Path
) -> None:
    marker = "L1-EVIDENCE-MARKER"
    simulator.load(
        scenario(
            [{"content": "Assessment:\n" + answer("critical", 0.96, evidence=marker)}],
            [{"content": answer("critical", 0.91, evidence="note and method")}],
        )
    )
    code, body = assess(text, "--config", str(simulated(simulator, tmp_path)))
    assert code == 0, body
    assert body["status"] == "ok" and body["level"] == "critical" and body["confirmed"] is True
    assert body["policy"] == "prohibited" and body["l1"]["offline"] is False
    requests = simulator.requests()
    assert [r["model"] for r in requests] == ["risk-l1", "risk-l2"]
    l2_wire = json.dumps(requests[1]["messages"], ensure_ascii=False)
    assert marker not in l2_wire and "0.96" not in l2_wire and "independent reviewer" in l2_wire
    assert text in json.dumps(requests[0]["messages"], ensure_ascii=False)


@pytest.mark.parametrize(
    ("l1_rules", "reason"),
    [
        ([{"fault": "delay", "delay_s": 3, "content": "late"}], "l1_timeout"),
        ([{"fault": "http_500"}], "l1_failed"),
        ([{"fault": "http_429", "retry_after_s": 1}], "l1_failed"),
        ([{"content": answer("super_critical")}], "l1_malformed"),
        ([{"fault": "malformed_json"}], "l1_failed"),
        ([{"content": answer("critical"), "fault": "truncated"}], "l1_malformed"),
    ],
    ids=["timeout", "http-500", "http-429", "super-critical", "broken-body", "truncated"],
)
def test_simulated_l1_faults_end_unknown(
    l1_rules: list[dict[str, Any]], reason: str, simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario(l1_rules, [{"content": answer("critical")}]))
    # Only the delay needs a short timeout; a loaded machine must not turn the others into one.
    timeout_s = 0.5 if reason == "l1_timeout" else 30
    code, body = assess(
        PLAN_ZH, "--config", str(simulated(simulator, tmp_path, timeout_s=timeout_s))
    )
    assert code == 0, body
    assert body["status"] == "unknown" and body["level"] is None and body["reasons"] == [reason]
    assert body["confirmed"] is False and body["policy"] == "restricted" and "resources" in body
    assert all(r["model"] == "risk-l1" for r in simulator.requests())


def test_a_simulated_l2_failure_keeps_l1_unconfirmed(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario([{"content": answer("critical", 0.99)}], [{"fault": "http_500"}]))
    code, body = assess(PLAN_EN, "--config", str(simulated(simulator, tmp_path)))
    assert code == 0 and body["status"] == "ok" and body["level"] == "critical"
    assert body["confirmed"] is False and body["reasons"] == ["l2_failed"]
