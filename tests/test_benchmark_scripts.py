"""The benchmark scripts run where the third-party data is missing, and say what they skipped.

Nothing here is timed: each script runs with tiny counts, and only its output is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


# --- benchmarks/gateway.py and its parts (issue 39 item 1) ---------------------------------

BENCH = ROOT / "benchmarks"


def _bench_modules() -> Any:
    """benchmarks/ on the path (its scripts import each other by bare name)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import gateway_report
    import loadgen
    import workers

    return gateway_report, loadgen, workers


def test_the_gateway_benchmark_alternates_the_systems_run_by_run_within_each_cell(
    tmp_path: Path,
) -> None:
    # Three repeats of two clients counts and three systems, a handful of replies each:
    # the cells come out A B C A B C A B C per (latency, clients), every reply checked and
    # made of two upstream calls, each cell with its load and its CPU from /proc.
    out = tmp_path / "run.json"
    result = subprocess.run(
        [sys.executable, "benchmarks/gateway.py", "--systems", "sdk,guard-reply,foureyes"]
        + ["--clients", "1,2", "--latencies-ms", "0", "--replies", "6", "--serial-replies", "4"]
        + ["--warmup", "1", "--repeats", "3", "--speculation-replies", "0", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    cells = report["cells"]
    floor, guard, gateway = (
        "floor: 2 upstream calls, no rail",
        "foureyes Guard.reply (library)",
        "foureyes gateway",
    )
    assert [(c["clients"], c["system"], c["run"]) for c in cells] == [
        (n, system, run) for n in (1, 2) for run in (1, 2, 3) for system in (floor, guard, gateway)
    ]
    assert [c["replies"] for c in cells] == [4] * 9 + [6] * 9
    for cell in cells:
        assert cell["failures"] == 0 and cell["calls_per_reply"] == 2.0
        assert cell["load_avg_before"] >= 0 and cell["idle_cpus"] >= 0
        assert 0 <= cell["niced_cpus"] <= cell["other_cpus"]
    by_system = {c["system"]: c for c in cells}
    # The gateway's CPU is its own process's, the client's separate; in-process, one clock.
    assert by_system[gateway]["server_cpu_ms"] is not None
    assert by_system[gateway]["client_cpu_ms"] is not None
    assert by_system[guard]["client_cpu_ms"] is None and by_system[guard]["server_cpu_ms"] > 0
    assert by_system[floor]["server_cpu_ms"] is None
    medians = {(m["system"], m["clients"]): m for m in report["medians"]}
    assert medians[(gateway, 2)]["runs"] == 3
    low, high = medians[(gateway, 2)]["replies_per_s_range"]
    assert low <= medians[(gateway, 2)]["replies_per_s"] <= high
    assert "Headline" not in result.stdout  # no IORails row to pair with: no headline
    assert "aiohttp" in result.stdout and "openai SDK (2 calls" not in result.stdout


NEMO_PYTHON = BENCH / ".venv-nemo" / "bin" / "python"


@pytest.mark.skipif(
    not NEMO_PYTHON.exists(), reason="NeMo's venv is absent: bash benchmarks/nemo/setup.sh"
)
def test_the_headline_pairs_iorails_in_its_own_process_with_guard_reply_run_by_run(
    tmp_path: Path,
) -> None:
    # NeMo as a library stays up for the whole run (library_bench.py --serve) so its cells
    # alternate with foureyes' ones; its CPU is read from its own process in /proc.
    out = tmp_path / "run.json"
    result = subprocess.run(
        [sys.executable, "benchmarks/gateway.py", "--systems", "iorails,guard-reply"]
        + ["--clients", "2", "--latencies-ms", "0", "--replies", "6", "--warmup", "2"]
        + ["--repeats", "2", "--speculation-replies", "0", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    iorails, guard = "NeMo IORails (library)", "foureyes Guard.reply (library)"
    assert [(c["system"], c["run"]) for c in report["cells"]] == [
        (iorails, 1),
        (guard, 1),
        (iorails, 2),
        (guard, 2),
    ]
    for cell in report["cells"]:
        assert cell["failures"] == 0 and cell["calls_per_reply"] == 2.0
        assert cell["replies"] == 6 and cell["server_cpu_ms"] is not None
    medians = {m["system"]: m for m in report["medians"]}
    assert medians[guard]["ratio"] is not None and len(medians[guard]["ratio_range"]) == 2
    assert "Headline" in result.stdout


def test_the_gateway_benchmark_refuses_zero_repeats_replies_and_unknown_systems() -> None:
    for extra, word in (
        (["--repeats", "0"], "--repeats"),
        (["--replies", "0"], "--replies"),
        (["--systems", "foureyes,nope"], "nope"),
    ):
        result = subprocess.run(
            [sys.executable, "benchmarks/gateway.py", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2 and word in result.stderr, extra


def test_the_paired_ratio_is_run_k_over_run_k_with_its_median_and_range() -> None:
    report, loadgen, _ = _bench_modules()

    def cell(system: str, run: int, replies_per_s: float) -> Any:
        made = loadgen.Cell(system, 0, 4, 100 / replies_per_s, [1.0] * 100, load_before=1.5)
        made.load_after = 2.5
        made.extra |= {"run": run, "server_cpu_ms": float(run), "other_cpus": 0.5}
        return made

    # IORails drifts down run by run; paired with its neighbour, foureyes is 1.0x, 1.5x,
    # 2.0x: a median of medians would say 200/150 = 1.33x.
    cells = [cell(report.IORAILS, 1, 200.0), cell(report.GUARD_REPLY, 1, 200.0)]
    cells += [cell(report.IORAILS, 2, 150.0), cell(report.GUARD_REPLY, 2, 225.0)]
    cells += [cell(report.IORAILS, 3, 100.0), cell(report.GUARD_REPLY, 3, 200.0)]
    table = report.medians(cells)
    mine = table[(report.GUARD_REPLY, 0, 4)]
    assert mine["ratio"] == 1.5 and mine["ratio_range"] == [1.0, 2.0]
    assert mine["replies_per_s"] == 200.0 and mine["replies_per_s_range"] == [200.0, 225.0]
    assert mine["cpu_ms"] == 2.0 and mine["cpu_ms_range"] == [1.0, 3.0]
    assert mine["load_avg_range"] == [1.5, 2.5] and mine["runs"] == 3
    assert table[(report.IORAILS, 0, 4)]["ratio"] is None  # the reference has no ratio
    headline = "\n".join(report._headline_table(cells))
    assert "1.50× (1.00–2.00)" in headline and "1.5–2.5" in headline


def test_the_cell_contention_splits_busy_cpus_into_ours_and_others() -> None:
    _, loadgen, _ = _bench_modules()
    # 10 s of wall time; the machine was busy 15 CPU-s (4 of them niced) and idle 5; ours
    # (not niced) took 6 of the 15.
    split = loadgen.contention((100.0, 50.0, 20.0), (115.0, 55.0, 24.0), 10.0, 6.0, False)
    assert split == {"idle_cpus": 0.5, "other_cpus": 0.9, "niced_cpus": 0.4}
    # Ours niced too: the niced time is partly ours (4 - 6 < 0), so none is someone else's.
    assert loadgen.contention((0, 0, 0), (15.0, 5.0, 4.0), 10.0, 6.0, True)["niced_cpus"] == 0
    # Our clocks can run a tick ahead of /proc/stat's: never a negative "others".
    split = loadgen.contention((0.0, 0.0, 0.0), (1.0, 0.0, 1.0), 1.0, 1.2, False)
    assert split["other_cpus"] == 0.0 and split["niced_cpus"] == 0.0
    busy, idle, niced = loadgen.machine_cpu()
    assert busy > 0 and idle >= 0 and 0 <= niced <= busy


def test_the_two_worker_ceiling_counts_only_the_cpus_left_idle() -> None:
    _, _, workers = _bench_modules()
    cell = {
        "replies_per_s": 500.0,
        "server_cpu_ms": 1.0,
        "postgres_cpu_ms": 0.4,
        "simulator_cpu_ms": 0.3,
        "client_cpu_ms": 0.3,
    }  # 500 x 2 ms: one CPU busy with the processes under test
    assert workers.busy_cpus(cell) == 1.0
    assert workers.ceiling(cell | {"idle_cpus": 0.0}) == 1.0  # others took the second CPU
    assert workers.ceiling(cell | {"idle_cpus": 0.5}) == 1.5
    assert workers.ceiling(cell | {"idle_cpus": 3.0}) == 2.0  # never more than twice
    # Niced work is the scheduler's to hand over: the wider ceiling counts it, the other not.
    busy_with_niced = cell | {"idle_cpus": 0.0, "niced_cpus": 0.6}
    assert workers.ceiling(busy_with_niced) == 1.0
    assert workers.preempting_ceiling(busy_with_niced) == 1.6


def test_the_postgres_clock_reads_one_cluster_found_by_its_port(
    postgres_server: Any,
) -> None:
    _bench_modules()
    import gateway_parts

    pid = gateway_parts.postmaster_pid(postgres_server.port)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert str(postgres_server.port).encode() in cmdline
    assert gateway_parts.postgres_clock(postgres_server.port)() > 0
    with pytest.raises(RuntimeError, match="no PostgreSQL postmaster"):
        gateway_parts.postmaster_pid(gateway_parts.free_port())


# --- benchmarks/README.md and LOG.md (issue 38 item 11) -----------------------------------


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    kept = "".join(ch for ch in heading.strip().lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def test_the_benchmarks_readme_leads_with_goals_each_with_its_command_date_and_machine() -> None:
    text = (BENCH / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index("| goal (issue) | current result | met | command | date, machine, load |")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    assert len(rows) >= 15
    # The first section of the page is the table: nothing but prose comes before it.
    assert lines.index("## Current results against their goals") < start
    assert [line for line in lines[:start] if line.startswith("## ")] == [
        "## Current results against their goals"
    ]
    for row in rows:
        assert len(row) == 5, row
        goal, result, met, command, when = row
        assert goal and result and met, row
        if command in {"the same run", "the same runs", "–"}:
            continue  # the row above's command, or no benchmark (said in its result)
        assert command.startswith("`") and ("benchmarks/" in command or "make" in command), row
        assert any(ch.isdigit() for ch in when) and ("load" in when or "committed" in when), row
    issues = {goal.rsplit("(", 1)[-1] for goal, *_ in rows}
    assert {"39)", "17)", "35)", "38 item 5)"} <= issues


def test_every_log_link_of_the_readme_names_a_section_of_the_log() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    log = (BENCH / "LOG.md").read_text(encoding="utf-8")
    anchors = {_anchor(line[3:]) for line in log.splitlines() if line.startswith("## ")}
    linked = set()
    for chunk in readme.split("](LOG.md#")[1:]:
        linked.add(chunk.split(")", 1)[0])
    assert len(linked) >= 10 and linked <= anchors, linked - anchors
    # The log keeps the history: the numbers of the first measurements are still there.
    for figure in ("| **aiohttp / httpx** | **1.23×** | **1.30×** |", "3,852 passed, pytest"):
        assert figure in log
