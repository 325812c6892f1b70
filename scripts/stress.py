"""Run part of the test suite many times in a row on a loaded machine: the stress mode.

Run from the repository root, after ``make install``::

    .venv/bin/python scripts/stress.py                       # the fault matrix, 20 runs
    .venv/bin/python scripts/stress.py --runs 5 tests/e2e    # any pytest target
    .venv/bin/python scripts/stress.py --hogs 0 --no-stall   # neither kind of load

Load is of two kinds, both on by default. ``--hogs N`` processes spin on the CPU for the
whole session (default: one per CPU), so pytest runs beside them as it does beside the
other xdist worker's browser and database. The stall plugin (``tests/helpers/stall.py``)
blocks the test process's event loop for ``--stall-s`` seconds every ``--every-s``
seconds, the pause a full garbage collection of a large worker or a descheduled process
makes. The runs stop at the first failure; the exit status is pytest's. Each run's
result, duration and the load average are printed. Not part of ``make test``: it takes
minutes, and what it shows is that a flake is gone, not that code is right.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGET = "tests/e2e/test_fault_matrix.py"


def _spin() -> None:  # pragma: no cover - runs in the hog processes
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    """Start the hogs, run the target until it fails or ``--runs`` times; pytest's status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="*", default=[DEFAULT_TARGET])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--no-stall", action="store_true", help="do not load the stall plugin")
    parser.add_argument("--stall-s", type=float, default=0.6)
    parser.add_argument("--every-s", type=float, default=1.5)
    args = parser.parse_args(argv)

    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    env = dict(
        os.environ, FOUREYES_STALL_S=str(args.stall_s), FOUREYES_STALL_EVERY_S=str(args.every_s)
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.target]
    if not args.no_stall:
        command[3:3] = ["-p", "tests.helpers.stall"]
    status = 0
    try:
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            tail = (done.stdout.strip().splitlines() or [""])[-1]
            load = " ".join(f"{value:.2f}" for value in os.getloadavg())
            took = time.monotonic() - started
            result = f"exit {done.returncode} in {took:.0f} s, load {load}"
            print(f"run {run}/{args.runs}: {result}: {tail}")
            if done.returncode != 0:
                print(done.stdout[-20_000:], done.stderr[-5_000:], sep="\n")
                status = done.returncode
                break
    finally:
        for hog in hogs:
            hog.terminate()
    stall = "off" if args.no_stall else f"{args.stall_s} s every {args.every_s} s"
    print(f"hogs {args.hogs}, stall {stall}")
    return status


if __name__ == "__main__":
    sys.exit(main())
