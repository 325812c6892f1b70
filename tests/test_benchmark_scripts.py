"""The benchmark scripts run where the third-party data is missing, and say what they skipped.

Nothing here is timed: each script runs with tiny counts, and only its output is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--texts", "12", "--compare-texts", "4", "--scales", "1", "--json"]


def test_the_l0_benchmark_runs_without_the_data_and_says_it_used_synthetic_messages(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "FOUREYES_DATA_DIR": str(tmp_path / "no-data")}
    result = subprocess.run(
        [sys.executable, "benchmarks/l0.py", *ARGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["source"] == "synthetic" and report["texts"] == 12
    assert report["skipped"] and "no-data" in report["skipped"][0]
    # Every fourth synthetic message is full length, so that figure has data too.
    assert report["full_length_texts"] == 3 and report["full_length_median_us"] is not None


def test_the_cli_startup_benchmark_runs_every_command_and_reports_ratios() -> None:
    # One round: the four commands ran (each must exit 0) and the report names them all;
    # the numbers themselves are not asserted.
    result = subprocess.run(
        [sys.executable, "benchmarks/cli_startup.py", "--rounds", "1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    commands = [row["command"] for row in report["results"]]
    assert commands == [
        "python -c pass",
        "python -c 'import foureyes'",
        "foureyes --help",
        "foureyes trace list",
    ]
    assert report["rounds"] == 1 and report["goal_ratio"] == 10.0
    assert len(report["load_before"]) == 3 and report["results"][0]["ratio"] == 1.0


def test_the_cli_startup_benchmark_refuses_zero_rounds() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/cli_startup.py", "--rounds", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--rounds" in result.stderr


def test_the_model_check_benchmark_asks_the_checker_once_per_reply_and_releases_all() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/input_model_check.py"]
        + ["--replies", "2", "--rounds", "1", "--delay-ms", "5", "--check-ms", "1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    cells = json.loads(result.stdout)["cells"]
    assert set(cells) == {"faster", "slower"}
    for cell in cells.values():
        assert cell["off"]["checker_calls_per_reply"] == 0
        assert cell["on"]["checker_calls_per_reply"] == 1
        assert cell["off"]["released_share"] == cell["on"]["released_share"] == 1
