"""A bad learned risk screen stops ``serve`` and fails ``config check`` (issue 14, item 1)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foureyes.cli import app
from foureyes.risk import screen_model
from foureyes.risk.screen_model import (
    FEATURE_VERSION,
    MANIFEST_FILE,
    PACKAGED_DIR,
    WEIGHTS_FILE,
    default_screen_model,
)

runner = CliRunner()


def _missing(directory: Path) -> None:
    (directory / WEIGHTS_FILE).unlink()


def _corrupt(directory: Path) -> None:
    (directory / MANIFEST_FILE).write_text("{truncated", "utf-8")


def _old_version(directory: Path) -> None:
    # A version 1 manifest (CRC-32 features), its digest still right.
    path = directory / MANIFEST_FILE
    manifest = json.loads(path.read_text("utf-8"))
    manifest["feature_version"] = FEATURE_VERSION - 1
    path.write_text(json.dumps(manifest), "utf-8")


def _digest_mismatch(directory: Path) -> None:
    path = directory / WEIGHTS_FILE
    weights = json.loads(path.read_text("utf-8"))
    weights["bias"] += 0.5
    path.write_text(json.dumps(weights), "utf-8")
    assert hashlib.sha256(path.read_bytes()).hexdigest() not in (
        directory / MANIFEST_FILE
    ).read_text("utf-8")


BREAKAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing": (_missing, "cannot be read"),
    "corrupt": (_corrupt, "not JSON"),
    "old version": (_old_version, "feature version"),
    "digest mismatch": (_digest_mismatch, "SHA-256"),
}


@pytest.fixture
def packaged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The packaged screen's files copied, and the copy taken for the packaged one.

    No config option names the screen's directory: the packaged path is what moves.
    """
    target = tmp_path / "screen"
    target.mkdir()
    for name in (MANIFEST_FILE, WEIGHTS_FILE):
        shutil.copy(PACKAGED_DIR / name, target / name)
    monkeypatch.setattr(screen_model, "PACKAGED_DIR", target)
    default_screen_model.cache_clear()
    yield target
    default_screen_model.cache_clear()


def test_the_copy_passes_config_check(packaged_copy: Path) -> None:
    result = runner.invoke(app, ["config", "check", "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_bad_screen_fails_config_check(packaged_copy: Path, breakage: str) -> None:
    damage, problem = BREAKAGES[breakage]
    damage(packaged_copy)
    result = runner.invoke(app, ["config", "check", "--json"])
    assert result.exit_code == 1
    body = json.loads(result.output)
    assert body["ok"] is False and body["error"] == "ConfigError"
    assert any("risk screen" in p and problem in p for p in body["problems"]), body


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_bad_screen_stops_serve_before_it_listens(packaged_copy: Path, breakage: str) -> None:
    damage, problem = BREAKAGES[breakage]
    damage(packaged_copy)
    result = runner.invoke(app, ["serve", "--port", "1", "--json"])
    assert result.exit_code == 1
    body = json.loads(result.output)
    assert body["error"] == "ConfigError"
    assert any(problem in p for p in body["problems"]), body
