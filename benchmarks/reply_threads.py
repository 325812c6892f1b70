"""Where does ``Guard.reply``'s CPU go, thread by thread?

``Guard.reply`` (support mode: triage, draft, review, gate, durable record) runs in this
process against ``foureyes simulate`` at zero model latency, with the gateway benchmark's
config (``gateway_parts.InProcess``: SQLite store, both model roles on the simulator), a new
conversation per reply. After ``--warmup`` replies it counts ``--replies`` more at
``--clients`` concurrent callers and reports replies/s and, from
``/proc/self/task/*/stat``, each thread's user and system CPU time per reply: the event
loop's thread, the SQLite writer thread, the reader thread (idle unless a read had to
wait). ``--rounds`` repeats the measure in new processes, so one machine state does not
decide it; the medians are printed last.

    python benchmarks/reply_threads.py [--replies 3000] [--clients 16] [--rounds 3]

Linux only (``/proc``). Results and how to read them: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gateway_parts import InProcess, scenario  # noqa: E402
from loadgen import start_simulator, stop_process  # noqa: E402


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by thread name, user and system."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.defaultdict(float)
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text(encoding="ascii")
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        fields = stat.rpartition(")")[2].split()
        # A pool thread's name ends in its number; threads of one pool are summed.
        name = names.get(int(tid), "other").rstrip("_0123456789")
        out[f"{name} user"] += int(fields[11]) / tick
        out[f"{name} system"] += int(fields[12]) / tick
    return dict(out)


async def measure(replies: int, clients: int, warmup: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        simulator, url = start_simulator(scenario(0.0), work)
        try:
            system = await InProcess.start("threads", url, "reply", work)
            try:

                async def run(count: int) -> None:
                    sent = 0

                    async def client() -> None:
                        nonlocal sent
                        while sent < count:
                            sent += 1
                            outcome = await system.reply(sent)
                            if not outcome.ok:
                                raise SystemExit(f"a reply was not released: {outcome}")

                    await asyncio.gather(*(client() for _ in range(clients)))

                await run(warmup)
                before, started = thread_cpu(), time.perf_counter()
                await run(replies)
                after, ended = thread_cpu(), time.perf_counter()
            finally:
                await system.aclose()
        finally:
            stop_process(simulator)
    result = {"replies/s": replies / (ended - started)}
    for key, seconds in after.items():
        spent = seconds - before.get(key, 0.0)
        if spent > 0:
            result[f"{key} ms/reply"] = 1000 * spent / replies
    result["all threads ms/reply"] = sum(v for k, v in result.items() if k.endswith("ms/reply"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(measure(args.replies, args.clients, args.warmup))))
        return
    runs: dict[str, list[float]] = collections.defaultdict(list)
    for n in range(args.rounds):
        command = [sys.executable, __file__, "--one", f"--replies={args.replies}"]
        command += [f"--clients={args.clients}", f"--warmup={args.warmup}"]
        line = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        result = json.loads(line.strip().splitlines()[-1])
        print(f"round {n + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in result.items()))
        for key, value in result.items():
            runs[key].append(value)
    print(f"medians of {args.rounds} rounds, {args.replies} replies at {args.clients} clients:")
    for key, values in runs.items():
        # A thread idle in some rounds counts as zero there.
        values = values + [0.0] * (args.rounds - len(values))
        print(f"  {key:40s} {statistics.median(values):9.3f}")


if __name__ == "__main__":
    main()
