"""``foureyes chat``: the support pipeline on stdin, offline and through ``foureyes simulate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from foureyes.cli import chat_cmd
from foureyes.core.digest import sha256_hex
from tests.helpers.simulator import SCENARIOS, RunningSimulator

runner = CliRunner()
app = typer.Typer()
app.command("chat")(chat_cmd.chat)
app.command("other")(lambda: None)  # a second command, so "chat" is named as in cli/main.py


def lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_each_line_is_answered_with_its_decision_line() -> None:
    result = runner.invoke(app, ["chat"], input="I had a rough day\n\nI want to die\n")

    assert result.exit_code == 0, result.output
    decisions = [line for line in result.output.splitlines() if " | trace " in line]
    assert len(decisions) == 2
    assert decisions[0].startswith("released approved | risk L0 low ok | policy normal |")
    assert decisions[1].startswith("released approved | risk L2 high ok | policy restricted |")
    assert "[Offline automatic reply]" in result.output


def test_json_mode_prints_one_object_per_message_with_the_foureyes_block() -> None:
    result = runner.invoke(
        app, ["chat", "--json", "--conversation-id", "cli-7"], input="hello\nstill here\n"
    )

    assert result.exit_code == 0, result.output
    first, second = lines(result.output)
    assert first["ok"] is True
    assert first["foureyes"]["delivered_sha256"] == sha256_hex(first["reply"])
    assert first["foureyes"]["trace_id"] != second["foureyes"]["trace_id"]
    assert set(first["timings"]) == {"total_ms", "triage_ms", "gate_ms", "model_ms", "overhead_ms"}


def test_the_conversation_carries_history_to_the_models(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(SCENARIOS / "gateway.toml")
    config = tmp_path / "foureyes.toml"
    config.write_text(
        f"""
[routes.counselor]
kind = "openai"
base_url = "{simulator.base_url}"
model = "counselor-sim"
[routes.supervisor]
kind = "openai"
base_url = "{simulator.base_url}"
model = "supervisor-sim"
[roles]
counselor = "counselor"
supervisor = "supervisor"
[gate]
max_revisions = 0
verdict_retries = 0
""",
        encoding="utf-8",
    )

    result = runner.invoke(
        app,
        ["chat", "--config", str(config), "--json"],
        input="FIRST-LINE-MARKER\nsupervisor-rejects: second\n",
    )

    assert result.exit_code == 0, result.output
    first, second = lines(result.output)
    assert first["foureyes"]["reason"] == "approved"
    assert second["foureyes"]["reason"] == "rejected"
    drafts = [r for r in simulator.requests() if r["model"] == "counselor-sim"]
    assert "FIRST-LINE-MARKER" in json.dumps(drafts[1]["messages"])  # an earlier turn


def test_an_unusable_store_exits_1_with_the_problem(tmp_path: Path) -> None:
    env = {"FOUREYES_STORE__URL": "sqlite+aiosqlite:///:memory:"}

    result = runner.invoke(app, ["chat", "--json"], input="hello\n", env=env)

    assert result.exit_code == 1
    failure = json.loads(result.output)
    assert (failure["ok"], failure["error"]) == (False, "ConfigError")
    assert "in-memory" in failure["problems"][0]


def test_a_conversation_id_longer_than_256_characters_is_refused() -> None:
    result = runner.invoke(app, ["chat", "--conversation-id", "x" * 257], input="hi\n")
    assert result.exit_code != 0


def test_help_and_unknown_commands_are_answered_locally_never_sent() -> None:
    result = runner.invoke(app, ["chat"], input="/help\n/whatever now\n//etc\n/quit\nhello\n")

    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert out[0] == chat_cmd.HELP_LINE
    for command in chat_cmd.COMMANDS:
        assert any(line.strip().startswith(command) for line in out)
    assert "unknown command /whatever (not sent); /help lists the commands" in out
    # Only "//etc" (the message "/etc") reached the pipeline; /quit ended the chat.
    decisions = [line for line in out if " | trace " in line]
    assert len(decisions) == 1


def test_json_mode_answers_commands_as_json_and_prints_no_help_line() -> None:
    result = runner.invoke(app, ["chat", "--json"], input="/help\n/nope\nhello\n")

    assert result.exit_code == 0, result.output
    help_, unknown, reply = lines(result.output)
    assert help_ == {"ok": True, "commands": chat_cmd.COMMANDS}
    assert unknown["ok"] is False and unknown["error"] == "UnknownCommand"
    assert "/nope" in unknown["problems"][0]
    assert reply["ok"] is True and "foureyes" in reply
