"""``foureyes checks list``: the catalogue of input checks and output rules."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from foureyes.cli.main import app
from foureyes.gate.rules import registered_rules
from foureyes.inputs import registered_checks

runner = CliRunner()


def test_the_catalogue_lists_every_check_and_rule_once(tmp_path: Path) -> None:
    config = tmp_path / "foureyes.toml"
    config.write_text(
        '[input.patterns.refund_talk]\ncategory = "off_topic"\npatterns = ["(?i)refund"]\n'
        'detects = "refund questions"\n',
        encoding="utf-8",
    )

    result = runner.invoke(app, ["checks", "list", "--json", "--config", str(config)])

    assert result.exit_code == 0, result.output
    entries = json.loads(result.output)
    ids = [(e["stage"], e["id"]) for e in entries]
    assert len(ids) == len(set(ids))
    checks = {p.name for p in registered_checks()}
    rules = {p.obj.id for p in registered_rules()}
    assert {i for s, i in ids if s == "input"} == checks | {"refund_talk", "model_check"}
    assert {i for s, i in ids if s == "output"} == rules
    [team] = [e for e in entries if e["id"] == "refund_talk"]
    assert (team["distribution"], team["categories"], team["detects"]) == (
        "config",
        ["off_topic"],
        "refund questions",
    )
    [model] = [e for e in entries if e["id"] == "model_check"]
    assert model["kind"] == "model" and model["detects"].endswith("off: [input] model_check")


def test_the_plain_listing_has_a_header_and_one_line_per_entry() -> None:
    result = runner.invoke(app, ["checks", "list", "--stage", "input"])

    assert result.exit_code == 0, result.output
    header, *lines = result.output.splitlines()
    assert header.split()[:3] == ["stage", "id", "kind"]
    assert len(lines) == len(registered_checks()) + 1
    assert all(line.startswith("input ") for line in lines)


def test_an_unknown_stage_is_refused() -> None:
    result = runner.invoke(app, ["checks", "list", "--stage", "middle"])
    assert result.exit_code == 2 and "input or output" in result.output
