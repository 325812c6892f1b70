"""CPU of starting the ``foureyes`` command, against a bare ``python -c pass``.

Four commands, each a fresh process, their user + system CPU read from
``resource.getrusage(RUSAGE_CHILDREN)`` around it (so the shell, the scheduler's waits and
the machine's other work are not counted, only what the process itself burned):

- ``python -c pass``: the interpreter alone, the unit of the ratios;
- ``python -c "import foureyes"``: the package (no pipeline, store or server);
- ``foureyes --help``: the command line's own start, every command listed;
- ``foureyes trace list``: a command that opens the store, on an empty SQLite store in a
  temporary folder (``FOUREYES_STORE__URL``; migrated to head by one run before timing).

Before timing, each command runs once with bytecode writing allowed (whatever
``PYTHONDONTWRITEBYTECODE`` says), so a source tree on ``PYTHONPATH`` is timed reading
its cached bytecode, as an installed package is, not compiling every module each run.

Each round runs the four in turn (A B C D), so a change in the machine's load falls on
all of them alike; the report gives each one's median, min-max and its median's ratio to
``python -c pass``, and the load average before and after. The goal of issue 38 is at most
10x for ``--help`` and ``trace list``.

    python benchmarks/cli_startup.py [--rounds 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GOAL = 10.0
"""At most this many times the CPU of ``python -c pass`` (issue 38)."""


def _foureyes() -> list[str]:
    # The console script beside this interpreter, as a user runs it; else the module.
    script = Path(sys.executable).with_name("foureyes")
    return [str(script)] if script.exists() else [sys.executable, "-m", "foureyes.cli"]


def _commands() -> dict[str, list[str]]:
    python = sys.executable
    return {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import foureyes'": [python, "-c", "import foureyes"],
        "foureyes --help": [*_foureyes(), "--help"],
        "foureyes trace list": [*_foureyes(), "trace", "list"],
    }


def _environment(folder: str) -> dict[str, str]:
    # The defaults but for the store: no config file, no other FOUREYES_* setting.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{Path(folder) / 'foureyes.db'}"
    return env


def _cpu_of(command: list[str], *, env: dict[str, str], cwd: str) -> float:
    """The user + system CPU seconds ``command`` used, run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr!r}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(rounds: int) -> dict[str, object]:
    """Run every command ``rounds`` times, alternating, and summarise each one's CPU."""
    commands = _commands()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="foureyes-cli-bench-") as folder:
        env = _environment(folder)
        # Not timed: creates the store and brings it to head, so the timed runs only open
        # it, and leaves every module's bytecode cached.
        warm = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        for command in commands.values():
            _cpu_of(command, env=warm, cwd=folder)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, command in commands.items():
                samples[name].append(_cpu_of(command, env=env, cwd=folder))
    load_after = os.getloadavg()
    unit = statistics.median(samples["python -c pass"])
    rows = []
    for name, values in samples.items():
        median = statistics.median(values)
        rows.append(
            {
                "command": name,
                "median_ms": round(median * 1000, 1),
                "min_ms": round(min(values) * 1000, 1),
                "max_ms": round(max(values) * 1000, 1),
                "ratio": round(median / unit, 1) if unit > 0 else None,
            }
        )
    return {
        "rounds": rounds,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "goal_ratio": GOAL,
        "results": rows,
    }


def _print(report: dict[str, object]) -> None:
    print(
        f"{report['rounds']} rounds, Python {report['python']}, {report['cpus']} CPUs, "
        f"load average {report['load_before']} -> {report['load_after']}"
    )
    print(f"{'command':30} {'median ms':>10} {'min-max ms':>16} {'x pass':>7}")
    results = report["results"]
    assert isinstance(results, list)
    for row in results:
        spread = f"{row['min_ms']:.1f}-{row['max_ms']:.1f}"
        print(f"{row['command']:30} {row['median_ms']:>10.1f} {spread:>16} {row['ratio']:>7}")


def main() -> None:
    """Parse the options, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds of A B C D (15)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds takes a whole number of at least 1")
    report = measure(args.rounds)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)


if __name__ == "__main__":
    main()
