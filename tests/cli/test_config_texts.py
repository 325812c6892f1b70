"""``foureyes config check`` on a ``[gate] texts_file``: read and checked as ``serve`` would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foureyes.cli import app

runner = CliRunner()

GOOD = """[guard.held_back]
en = "Sorry, the front desk cannot do that here."
zh-Hans = "抱歉，前台在这里办不了这件事。"
zh-Hant = "抱歉，櫃檯在這裡辦不了這件事。"
"""


def check(tmp_path: Path, texts: str | None) -> tuple[int, dict[str, object]]:
    config = tmp_path / "f.toml"
    path = tmp_path / "texts.toml"
    if texts is not None:
        path.write_text(texts, encoding="utf-8")
    config.write_text(f"[gate]\ntexts_file = '{path}'\n", encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(config), "--json"])
    return result.exit_code, json.loads(result.output)


def test_a_good_texts_file_passes_and_shows_in_the_config(tmp_path: Path) -> None:
    code, body = check(tmp_path, GOOD)
    assert code == 0, body
    assert body["config"]["gate"]["texts_file"] == str(tmp_path / "texts.toml")  # type: ignore[index]


@pytest.mark.parametrize(
    ("texts", "problem"),
    [
        (None, "does not exist"),
        ("[guard.held_back", "is not valid TOML"),
        (GOOD.replace("held_back", "held_bak"), "(did you mean 'held_back'?)"),
        (GOOD.replace("zh-Hant", "zh_Hant"), "unknown locale 'zh_Hant' (did you mean 'zh-Hant'?)"),
        (GOOD.replace("zh-Hant = ", "# zh-Hant = "), "guard.held_back lacks zh-Hant"),
        (GOOD.replace("Sorry, the front desk cannot do that here.", ""), "held_back.en is empty"),
        (
            GOOD.replace("Sorry, the", "You are clinically depressed; the"),
            "guard.held_back.en breaks rule diagnosis_claim",
        ),
    ],
)
def test_a_bad_texts_file_fails_the_check_naming_the_entry(
    tmp_path: Path, texts: str | None, problem: str
) -> None:
    code, body = check(tmp_path, texts)
    assert code == 1
    assert body["error"] == "ConfigError"
    problems = body["problems"]
    assert isinstance(problems, list)
    assert any(problem in p for p in problems), problems
