"""``foureyes review`` on every real trajectory, with ``foureyes simulate`` as the reviewer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from foureyes.cli import review_cmd
from foureyes.review.importers import load_session
from foureyes.review.session import Session, TurnEnd
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import (
    CASSETTES,
    REVIEWER_MODEL,
    SESSION_FILES,
    cassette_bodies,
    packet,
    scenario,
)

# The command as cli/main.py registers it: `app.command("review")(review_cmd.review)`.
app = typer.Typer()


@app.callback()
def _root() -> None:
    """The review command alone, registered as cli/main.py does."""


app.command("review")(review_cmd.review)
runner = CliRunner()

ANSWER = packet("the agent never ran the full test suite", kind="possible_error")


def invoke(*args: str) -> Result:
    return runner.invoke(app, ["review", *args])


def document(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def sim_config_file(tmp_path: Path, simulator: RunningSimulator, **review: Any) -> Path:
    lines = [
        "[routes.sim]",
        'kind = "openai"',
        f'base_url = "{simulator.base_url}"',
        f'model = "{REVIEWER_MODEL}"',
        "timeout_s = 10",
        "[roles]",
        'reviewer = "sim"',
        "[review]",
        *(f"{key} = {json.dumps(value)}" for key, value in review.items()),
    ]
    path = tmp_path / "foureyes.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def real_files(tmp_path: Path) -> list[tuple[Path, str]]:
    """Every real trajectory as a file the command reads, with its format option.

    SWE-agent and OpenHands files and the VCR cassettes are read in place; each cassette's
    chat traffic also becomes an OpenAI chat JSON file (the conversation with its recorded
    answer).
    """
    files = [(p, "swe-agent" if p.suffix == ".traj" else "openhands") for p in SESSION_FILES]
    for cassette in CASSETTES:
        path = tmp_path / f"{cassette.stem}.json"
        path.write_text(json.dumps(cassette_bodies(cassette)["done"]), encoding="utf-8")
        files.append((path, "openai"))
        files.append((cassette, "vcr"))  # and the cassette itself, read in place
    return files


def in_progress_file(session: Session, tmp_path: Path, name: str) -> Path:
    """The session as it stood before its last turn ended, as native JSONL."""
    assert isinstance(session.events[-1], TurnEnd)
    live = Session(events=session.events[:-1], system=session.system, tools=session.tools)
    path = tmp_path / f"{name}.jsonl"
    path.write_text(live.to_jsonl(), encoding="utf-8")
    return path


@pytest.mark.parametrize("mask", ["reasoning-only", "action-only"])
@pytest.mark.usefixtures("third_party_data")
def test_review_works_on_every_real_trajectory(
    simulator: RunningSimulator, tmp_path: Path, mask: str
) -> None:
    simulator.load(scenario({"content": ANSWER}))
    config = str(sim_config_file(tmp_path, simulator))
    files = real_files(tmp_path)
    assert len(files) == len(SESSION_FILES) + 2 * len(CASSETTES) >= 12
    calls = 0
    for path, fmt in files:
        for explicit in (fmt, "auto"):
            body = document(invoke(str(path), "--window", "recent:3", "--mask", mask,
                                   "--format", explicit, "--config", config, "--json"))  # fmt: skip
            assert body["ok"] is True and body["accepted"] is True, (path.name, body)
            assert body["outcome"]["packet"]["items"][0]["kind"] == "possible_error"
            assert body["projection"]["mask"] == mask and body["trace_id"]
            assert body["publication"]["source"] == "plugin"
            calls += 1
        # Every real trajectory has ended, so the current turn has nothing open to review:
        # a skip with metadata only, before any model call.
        body = document(invoke(str(path), "--window", "current-turn", "--mask", mask,
                               "--config", config, "--json"))  # fmt: skip
        assert body["skipped"] == "no_open_turn" and body["outcome"] is None
        # The same session while its turn was still running: the current turn is reviewed.
        live = in_progress_file(load_session(path, _FORMAT[fmt]), tmp_path, path.stem)
        body = document(invoke(str(live), "--window", "current-turn", "--mask", mask,
                               "--config", config, "--json"))  # fmt: skip
        assert body["accepted"] is True, (path.name, body)
        calls += 1
    assert len(simulator.requests()) == calls


_FORMAT = {
    "swe-agent": "swe-agent",
    "openhands": "openhands",
    "openai": "openai-chat",
    "vcr": "vcr",
}


@pytest.mark.usefixtures("third_party_data")
def test_reviewer_persona_mode_and_human_output(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": ANSWER}))
    config = str(sim_config_file(tmp_path, simulator))
    path = SESSION_FILES[0]
    body = document(invoke(str(path), "--mode", "reviewer-persona", "--config", config, "--json"))
    assert body["request"]["mode"] == "reviewer-persona"
    (sent,) = simulator.requests()
    assert sent["messages"][0]["role"] == "system"
    assert "independent reviewer" in sent["messages"][0]["content"]
    human = invoke(str(path), "--config", config)
    assert human.exit_code == 0, human.output
    assert "packet accepted" in human.output and "possible_error" in human.output


@pytest.mark.usefixtures("third_party_data")
def test_a_reviewer_fault_is_a_result_not_an_error(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": "I think it is fine."}))
    config = str(sim_config_file(tmp_path, simulator))
    body = document(invoke(str(SESSION_FILES[0]), "--config", config, "--json"))
    assert body["accepted"] is False and body["publication"] is None
    assert body["outcome"]["reason"] == "review_malformed"
    assert body["outcome"]["rejection"] == "no_json"
    human = invoke(str(SESSION_FILES[0]), "--config", config)
    assert human.exit_code == 0 and "no packet" in human.output


@pytest.mark.usefixtures("third_party_data")
def test_project_only_prints_the_projection_and_calls_no_model(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    config = str(sim_config_file(tmp_path, simulator))
    path = next(p for p in SESSION_FILES if p.suffix == ".traj")
    session = load_session(path)
    body = document(invoke(str(path), "--project-only", "--config", config, "--json"))
    assert body["skipped"] is None and body["snapshot"]["role"] == "user"
    assert body["projection"]["omitted_reasoning_blocks"] > 0
    assert body["session"] == {"file": str(path), "events": len(session.events)}
    full = document(invoke(str(path), "--project-only", "--mask", "none", "--json"))
    assert full["projection"]["omitted_reasoning_blocks"] == 0
    assert len(json.dumps(full["snapshot"])) > len(json.dumps(body["snapshot"]))
    human = invoke(str(path), "--project-only")
    assert human.exit_code == 0 and "projection" in human.output
    skipped = invoke(str(path), "--project-only", "--window", "current-turn")
    assert skipped.exit_code == 0 and "no_open_turn" in skipped.output
    assert simulator.requests() == []


@pytest.mark.usefixtures("third_party_data")
def test_the_offline_default_publishes_no_review(tmp_path: Path) -> None:
    body = document(invoke(str(SESSION_FILES[0]), "--json", "--config", str(publish_all(tmp_path))))
    outcome = body["outcome"]
    assert outcome["offline"] is True and outcome["reason"] == "reviewer_offline"
    assert outcome["packet"] is None and outcome["published"] is False
    assert "offline engine cannot review" in outcome["detail"]
    assert body["publication"] is None

    text = invoke(str(SESSION_FILES[0]))
    assert "no packet: reviewer_offline" in text.output and "published" not in text.output


def publish_all(tmp_path: Path) -> Path:
    """A config that publishes every accepted packet: even then nothing offline is."""
    path = tmp_path / "all.toml"
    path.write_text('[review]\npublish = "all"\n', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "args", "code", "expected"),
    [
        ("not json at all", [], 1, "SessionFormatError"),
        ('{"messages": [{"role": "robot"}]}', ["--format", "openai"], 1, "SessionFormatError"),
        ("[]", ["--window", "recent:zero"], 2, "recent:K"),
        ("[]", ["--format", "yaml"], 2, "yaml"),
        ("[]", ["--mask", "everything"], 2, "everything"),
    ],
)
def test_bad_input_fails_with_its_reason(
    tmp_path: Path, content: str, args: list[str], code: int, expected: str
) -> None:
    path = tmp_path / "session.json"
    path.write_text(content, encoding="utf-8")
    result = invoke(str(path), *args, "--json")
    assert result.exit_code == code
    assert expected in result.output


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke(str(tmp_path / "nope.json"))
    assert result.exit_code == 2


def test_an_empty_session_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("[]", encoding="utf-8")
    body = document(invoke(str(path), "--json"))
    assert body["skipped"] == "empty_session" and body["session"]["events"] == 0


@pytest.mark.usefixtures("third_party_data")
def test_a_publish_value_that_names_no_policy_is_a_config_error(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    # The config accepts exactly the three policies: anything else stops the command with
    # the key named, never a fall back to a guessed policy.
    config = sim_config_file(tmp_path, simulator, publish="always")
    result = invoke(str(SESSION_FILES[0]), "--config", str(config), "--json")
    assert result.exit_code == 1
    assert "review.publish" in result.output
