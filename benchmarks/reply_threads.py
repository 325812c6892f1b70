"""Where does ``Guard.reply``'s CPU go, thread by thread?

``Guard.reply`` (support mode: triage, draft, review, gate, durable record) runs in this
process against ``foureyes simulate`` at zero model latency, with the gateway benchmark's
config (``gateway_parts.InProcess``: SQLite store, both model roles on the simulator), a new
conversation per reply. After ``--warmup`` replies it counts ``--replies`` more at
``--clients`` concurrent callers and reports replies/s, the replies' latency percentiles
and, from ``/proc/self/task/*/stat``, each thread's user and system CPU time per reply: the
event loop's thread, the SQLite writer thread, the reader thread (idle unless a read had to
wait); and from ``/proc/self/task/*/status`` each thread's context switches per reply,
voluntary (it waited: for the interpreter's lock, I/O, work) and involuntary (preempted).
``--rounds`` repeats the measure in new processes, so one machine state does not decide it;
the medians are printed last. ``--settle-collector``: after the warm-up the process settles
its garbage collector as ``foureyes serve`` does (``foureyes.server.app.settle_collector``),
as a host of ``Guard`` may. ``--count-garbage``: the measured replies also count the objects
the cyclic collector had to free (reference cycles a reply left behind), per reply; the
collector then keeps them, so that round's CPU is not comparable.

    python benchmarks/reply_threads.py [--replies 3000] [--clients 16] [--rounds 3]
        [--settle-collector] [--count-garbage]

Linux only (``/proc``). Results: benchmarks/README.md (current, and how to read them),
benchmarks/LOG.md (history).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gateway_parts import InProcess, cpu_times, scenario  # noqa: E402
from loadgen import drive, start_simulator, stop_process  # noqa: E402

from foureyes.server.app import settle_collector  # noqa: E402


def _threads() -> list[tuple[str, str]]:
    """(thread name, ``/proc`` task id) of each live thread; a pool's threads share a name."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    # A pool thread's name ends in its number; threads of one pool are summed.
    return [
        (names.get(int(tid), "other").rstrip("_0123456789"), tid)
        for tid in os.listdir("/proc/self/task")
    ]


def thread_switches() -> dict[str, float]:
    """Context switches of each live thread so far, by thread name, voluntary and not.

    A thread that waits (for the interpreter's lock, a lock, I/O) switches voluntarily;
    one the kernel preempts, involuntarily.
    """
    out: dict[str, float] = collections.defaultdict(float)
    for name, tid in _threads():
        try:
            status = Path(f"/proc/self/task/{tid}/status").read_text(encoding="ascii")
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        out[f"{name} voluntary"] += int(fields["voluntary_ctxt_switches"])
        out[f"{name} involuntary"] += int(fields["nonvoluntary_ctxt_switches"])
    return dict(out)


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by thread name, user and system."""
    out: dict[str, float] = collections.defaultdict(float)
    for name, tid in _threads():
        try:
            user, system = cpu_times(Path(f"/proc/self/task/{tid}/stat"))
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        out[f"{name} user"] += user
        out[f"{name} system"] += system
    return dict(out)


async def measure(
    replies: int, clients: int, warmup: int, *, settle: bool, count_garbage: bool
) -> dict[str, float]:
    garbage = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        simulator, url = start_simulator(scenario(0.0), work)
        try:
            system = await InProcess.start("threads", url, "reply", work)
            try:
                await drive(system.reply, warmup, clients)
                if settle:
                    settle_collector()
                if count_garbage:
                    gc.collect()
                    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector frees, it keeps here
                before, switched = thread_cpu(), thread_switches()
                wall, latencies, outcomes = await drive(system.reply, replies, clients)
                after, switches = thread_cpu(), thread_switches()
                if count_garbage:
                    gc.collect()
                    garbage = len(gc.garbage)
                    gc.set_debug(0)
                    gc.garbage.clear()
            finally:
                await system.aclose()
        finally:
            stop_process(simulator)
    if not all(outcome.ok for outcome in outcomes):
        raise SystemExit("a reply was not released as drafted")
    result = {"replies/s": replies / wall}
    latencies.sort()
    for name, share in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
        result[f"latency {name} ms"] = latencies[min(len(latencies) - 1, int(share * replies))]
    result["latency max ms"] = latencies[-1]
    for key, seconds in after.items():
        spent = seconds - before.get(key, 0.0)
        if spent > 0:
            result[f"{key} ms/reply"] = 1000 * spent / replies
    result["all threads ms/reply"] = sum(v for k, v in result.items() if k.endswith("ms/reply"))
    for key, count in switches.items():
        if count > switched.get(key, 0.0):
            result[f"{key} switches/reply"] = (count - switched.get(key, 0.0)) / replies
    if count_garbage:
        result["cyclic garbage objects/reply"] = garbage / replies
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle-collector", action="store_true")
    parser.add_argument("--count-garbage", action="store_true")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        options = {"settle": args.settle_collector, "count_garbage": args.count_garbage}
        result = asyncio.run(measure(args.replies, args.clients, args.warmup, **options))
        print(json.dumps(result))
        return
    runs: dict[str, list[float]] = collections.defaultdict(list)
    for n in range(args.rounds):
        command = [sys.executable, __file__, "--one", f"--replies={args.replies}"]
        command += [f"--clients={args.clients}", f"--warmup={args.warmup}"]
        command += ["--settle-collector"] * args.settle_collector
        command += ["--count-garbage"] * args.count_garbage
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
