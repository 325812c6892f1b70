"""Trace analysis and the Markdown report of benchmarks/gateway.py."""

from __future__ import annotations

import shlex
import statistics
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from gateway_parts import request_durations
from loadgen import Cell, percentile

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.trace import EventKind, TraceRecord
from foureyes.store import Store

NEMO_SERVER = "NeMo server"
LLMRAILS = "NeMo LLMRails (library)"
IORAILS = "NeMo IORails (library)"
IORAILS_SERVER = "NeMo IORails, bare ASGI server"
GUARD_REPLY = "foureyes Guard.reply (library)"
GUARD_CHECK = "foureyes Guard.check of the host's draft (library)"
FOUREYES = "foureyes gateway"
FOUREYES_SDK = "foureyes gateway, openai SDK transport"
FOUREYES_NO_GROUP = "foureyes gateway, no group commit"
GATEWAYS = (FOUREYES, FOUREYES_SDK, FOUREYES_NO_GROUP)
SDK = "floor: 2 upstream calls, no rail"
KINDS = (
    ("library", IORAILS, (IORAILS, LLMRAILS, GUARD_REPLY, GUARD_CHECK, SDK)),
    ("server", IORAILS_SERVER, (IORAILS_SERVER, NEMO_SERVER, *GATEWAYS)),
)
"""Each kind of row, the row its ratios are to, and its rows in order."""


def progress(cell: Cell) -> str:
    """One line to stderr while the run goes on."""
    return (
        f"{cell.system:32} {cell.latency_ms:>3} ms {cell.concurrency:>3} clients: "
        f"{cell.throughput:7.1f} replies/s  p50 {cell.p50:7.1f} ms  p99 {cell.p99:7.1f} ms  "
        f"failed {cell.failures}"
    )


def union_ms(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals (seconds in, ms out)."""
    total = 0.0
    end = float("-inf")
    for start, stop in sorted(intervals):
        if start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total * 1000


def model_calls(record: TraceRecord) -> list[tuple[float, float]]:
    """Each model call of a run as ``(start, end)`` epoch seconds.

    A ``model_call`` event is written right after its call returns, so its time is the
    call's end and ``latency_ms`` (measured around the provider) gives its start.
    """
    calls = []
    for event in record.events:
        if event.kind is EventKind.MODEL_CALL:
            end = event.at.timestamp()
            calls.append((end - float(event.data["latency_ms"]) / 1000, end))
    return calls


async def read_traces(store_url: str, trace_ids: Sequence[str | None]) -> list[TraceRecord]:
    store = await Store.open(StoreConfig(url=store_url), PrivacyConfig(), {})
    try:
        records = []
        for trace_id in trace_ids:
            record = None if trace_id is None else await store.traces.get(trace_id)
            if record is None:
                raise RuntimeError(f"trace {trace_id!r} is not in {store_url}")
            records.append(record)
        return records
    finally:
        await store.close()


async def split(servers: Any, cell: Cell) -> dict[str, list[float]]:
    """Per reply: model time (union of its calls), the calls summed, and the overheads.

    ``server`` is the gateway's own request time (its request log) minus model time;
    ``client`` is the latency the client saw minus model time (so it also holds the
    client's SDK and the loopback hop); ``in_run`` is the pipeline run's span in the trace
    (start to commit) minus model time.
    """
    assert cell.source is not None
    durations = request_durations(servers.logs[cell.source])
    records = await read_traces(servers.store_urls[cell.source], cell.trace_ids)
    rows: dict[str, list[float]] = {
        k: [] for k in ("model", "summed", "calls", "client", "server", "in_run")
    }
    for latency, record in zip(cell.latencies_ms, records, strict=True):
        calls = model_calls(record)
        model = union_ms(calls)
        rows["model"].append(model)
        rows["summed"].append(sum(end - start for start, end in calls) * 1000)
        rows["calls"].append(len(calls))
        rows["client"].append(latency - model)
        if record.run.trace_id in durations:
            rows["server"].append(durations[record.run.trace_id] - model)
        if record.run.finished_at is not None:
            run_ms = (record.run.finished_at - record.run.started_at).total_seconds() * 1000
            rows["in_run"].append(run_ms - model)
    return rows


def _p50(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _p99(values: Sequence[float]) -> float | None:
    return round(percentile(values, 0.99), 2) if values else None


async def overheads(servers: Any, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """The gateway's own overhead per reply, per measured cell."""
    out = []
    for cell in cells:
        rows = await split(servers, cell)
        out.append(
            {
                "gateway": cell.system,
                "model_latency_ms": cell.latency_ms,
                "clients": cell.concurrency,
                "server_overhead_p50_ms": _p50(rows["server"]),
                "server_overhead_p99_ms": _p99(rows["server"]),
                "client_overhead_p50_ms": _p50(rows["client"]),
                "in_run_overhead_p50_ms": _p50(rows["in_run"]),
                "model_p50_ms": _p50(rows["model"]),
                "model_calls_per_reply": round(statistics.mean(rows["calls"]), 2),
                "gateway_cpu_ms_per_reply": cell.extra.get("server_cpu_ms"),
            }
        )
    return out


async def speculation(servers: Any, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Latency of the escalating message with and without the speculative draft."""
    out = []
    for cell in cells:
        rows = await split(servers, cell)
        out.append(
            {
                "mode": cell.source,
                "model_latency_ms": cell.latency_ms,
                "replies": len(cell.latencies_ms),
                "failures": cell.failures,
                "p50_ms": round(cell.p50, 2),
                "p99_ms": round(cell.p99, 2),
                "model_calls_per_reply": round(statistics.mean(rows["calls"]), 2),
                "model_time_on_path_p50_ms": _p50(rows["model"]),
                "model_time_summed_p50_ms": _p50(rows["summed"]),
            }
        )
    return out


Key = tuple[str, int, int]
"""A cell's system, model latency (ms) and clients."""


def reference_of(system: str) -> str | None:
    """The IORails row a system's ratios are to: its kind's (library or server)."""
    for _kind, reference, systems in KINDS:
        if system in systems:
            return reference
    return None


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def medians(cells: Sequence[Cell]) -> dict[Key, dict[str, Any]]:
    """Per system, latency and clients: medians and ranges over runs, paired ratios.

    ``replies_per_s`` and ``cpu_ms`` are medians (``cpu_ms`` of the runs that have one,
    ``None`` when none does: the floor has no server), ``*_range`` their ``[min, max]``;
    ``ratio`` is the median of the paired ratios to IORails of the same kind (run k over
    run k, measured back to back), ``ratio_range`` their range; ``load_avg_range`` the
    one-minute load average over the cells' starts and ends, ``other_cpus`` the median CPUs
    busy with processes not under test; ``runs`` how many runs, ``failures`` the failed
    replies of all of them.
    """
    grouped: dict[Key, list[Cell]] = {}
    for cell in cells:
        grouped.setdefault((cell.system, cell.latency_ms, cell.concurrency), []).append(cell)
    out = {}
    for key, runs in grouped.items():
        cpu = [c.extra["server_cpu_ms"] for c in runs if c.extra.get("server_cpu_ms") is not None]
        throughput = _spread([c.throughput for c in runs])
        assert throughput is not None
        cpu_spread = _spread(cpu)
        reference = reference_of(key[0])
        ratios: list[float] = []
        if reference is not None and reference != key[0]:
            theirs = {c.extra.get("run", 1): c for c in grouped.get((reference, *key[1:]), [])}
            ratios = [
                c.throughput / theirs[c.extra.get("run", 1)].throughput
                for c in runs
                if c.extra.get("run", 1) in theirs
            ]
        ratio = _spread(ratios)
        loads = [x for c in runs for x in (c.load_before, c.load_after)]
        others = [c.extra["other_cpus"] for c in runs if "other_cpus" in c.extra]
        out[key] = {
            "replies_per_s": throughput["median"],
            "replies_per_s_range": [throughput["min"], throughput["max"]],
            "cpu_ms": cpu_spread["median"] if cpu_spread else None,
            "cpu_ms_range": [cpu_spread["min"], cpu_spread["max"]] if cpu_spread else None,
            "ratio": round(ratio["median"], 3) if ratio else None,
            "ratio_range": [round(ratio["min"], 3), round(ratio["max"], 3)] if ratio else None,
            "load_avg_range": [round(min(loads), 2), round(max(loads), 2)],
            "other_cpus": round(statistics.median(others), 2) if others else None,
            "runs": len(runs),
            "failures": sum(c.failures for c in runs),
        }
    return out


def _ratio(mine: Mapping[str, Any] | None, other: Mapping[str, Any] | None) -> str:
    if not mine or not other:
        return "n/a"
    return f"{mine['replies_per_s'] / other['replies_per_s']:.2f}×"


def _paired(row: Mapping[str, Any] | None) -> str:
    """A paired ratio, median (min–max)."""
    if not row or row.get("ratio") is None:
        return "n/a"
    low, high = row["ratio_range"]
    return f"{row['ratio']:.2f}× ({low:.2f}–{high:.2f})"


def _with_range(row: Mapping[str, Any] | None, name: str, digits: int = 1) -> str:
    if not row or row.get(name) is None:
        return "–"
    low, high = row[f"{name}_range"]
    return f"{row[name]:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def _cpu(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"


def _throughput_tables(cells: Sequence[Cell]) -> list[str]:
    out = []
    for latency in sorted({c.latency_ms for c in cells}):
        out += [
            "",
            f"Model latency {latency} ms per call, every run in the order measured:",
            "",
            "| system | run | clients | replies/s | p50 ms | p99 ms | upstream calls/reply "
            "| failed | server CPU ms/reply | simulator CPU ms/reply | client CPU ms/reply "
            "| load avg before → after | CPUs idle | CPUs busy with others (niced) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- "
            "| ---: | ---: |",
        ]
        for c in (c for c in cells if c.latency_ms == latency):
            out.append(
                f"| {c.system} | {c.extra.get('run', 1)} | {c.concurrency} | {c.throughput:.1f} "
                f"| {c.p50:.1f} | {c.p99:.1f} "
                f"| {c.extra.get('calls_per_reply', 'n/a')} | {c.failures} "
                f"| {_cpu(c.extra.get('server_cpu_ms'))} | {_cpu(c.extra.get('simulator_cpu_ms'))} "
                f"| {_cpu(c.extra.get('client_cpu_ms'))} "
                f"| {c.load_before:.1f} → {c.load_after:.1f} "
                f"| {c.extra.get('idle_cpus', 'n/a')} | {c.extra.get('other_cpus', 'n/a')} "
                f"({c.extra.get('niced_cpus', 'n/a')}) |"
            )
    return out


HEADLINE = ((GUARD_REPLY, IORAILS), (FOUREYES, IORAILS_SERVER))
"""The headline's pairs: the library with the library, the server with the server."""


def _headline_table(cells: Sequence[Cell]) -> list[str]:
    """The headline: foureyes against IORails, library and server, medians and ratios."""
    table = medians(cells)
    present = {c.system for c in cells}
    pairs = [(mine, ref) for mine, ref in HEADLINE if mine in present and ref in present]
    if not pairs:
        return []
    runs = max(m["runs"] for m in table.values())
    out = [
        "",
        f"Headline (medians of {runs} strictly alternated runs, (min–max); × is the median "
        "of the paired ratios of replies/s, run k over run k; CPU is ms per reply of the "
        "process under test):",
        "",
    ]
    head = "| model latency | clients "
    rule = "| ---: | ---: "
    for mine, ref in pairs:
        head += f"| {mine} replies/s | {ref} replies/s | × | CPU ms: foureyes | CPU ms: IORails "
        rule += "| ---: | ---: | ---: | ---: | ---: "
    out += [head + "| load avg | CPUs busy with others | failed |", rule + "| --- | ---: | ---: |"]
    for latency in sorted({c.latency_ms for c in cells}):
        for n in sorted({c.concurrency for c in cells}):
            line = f"| {latency} ms | {n} "
            loads: list[float] = []
            others: list[float] = []
            failed = 0
            for mine, ref in pairs:
                a, b = table.get((mine, latency, n)), table.get((ref, latency, n))
                line += (
                    f"| {_with_range(a, 'replies_per_s')} | {_with_range(b, 'replies_per_s')} "
                    f"| {_paired(a)} | {_with_range(a, 'cpu_ms', 2)} "
                    f"| {_with_range(b, 'cpu_ms', 2)} "
                )
                for row in (a, b):
                    if row:
                        loads += row["load_avg_range"]
                        others += [] if row["other_cpus"] is None else [row["other_cpus"]]
                        failed += row["failures"]
            load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "–"
            other = f"{statistics.median(others):.2f}" if others else "–"
            out.append(line + f"| {load} | {other} | {failed} |")
    return out


def _peer_table(cells: Sequence[Cell]) -> list[str]:
    """Library with library, server with server: medians over runs, ratios to IORails."""
    table = medians(cells)
    runs = max((m["runs"] for m in table.values()), default=0)
    out = [
        "",
        f"Library with library, server with server (medians of {runs} runs, (min–max); "
        "× IORails: median (min–max) of the paired ratios of replies/s to NeMo IORails of "
        "the same kind, run k over run k, back to back):",
        "",
        "| kind | system | model latency | clients | replies/s | CPU ms/reply | × IORails "
        "| load avg | failed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for kind, _reference, systems in KINDS:
        for latency in sorted({c.latency_ms for c in cells}):
            for system in systems:
                for n in sorted({c.concurrency for c in cells}):
                    row = table.get((system, latency, n))
                    if row is None:
                        continue
                    low, high = row["load_avg_range"]
                    out.append(
                        f"| {kind} | {system} | {latency} ms | {n} "
                        f"| {_with_range(row, 'replies_per_s')} "
                        f"| {_with_range(row, 'cpu_ms', 2)} | {_paired(row)} "
                        f"| {low:.1f}–{high:.1f} | {row['failures']} |"
                    )
    return out


def _ratio_table(cells: Sequence[Cell]) -> list[str]:
    table = medians(cells)
    out = [
        "",
        "Throughput ratios of each foureyes gateway over the others (medians over runs):",
        "",
        "| gateway | model latency | clients | NeMo server (goal ≥ 5×) "
        "| NeMo LLMRails (goal > 1×) | floor (no rail) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for gateway in (g for g in GATEWAYS if any(c.system == g for c in cells)):
        for latency in sorted({c.latency_ms for c in cells}):
            for n in sorted({c.concurrency for c in cells}):
                mine = table.get((gateway, latency, n))
                out.append(
                    f"| {gateway} | {latency} ms | {n} "
                    f"| {_ratio(mine, table.get((NEMO_SERVER, latency, n)))} "
                    f"| {_ratio(mine, table.get((LLMRAILS, latency, n)))} "
                    f"| {_ratio(mine, table.get((SDK, latency, n)))} |"
                )
    return out


def _overhead_table(overheads: Sequence[Mapping[str, Any]]) -> list[str]:
    out = [
        "",
        "Gateway's own overhead per reply, first run (time minus the time inside model "
        "calls); goal: p50 < 3 ms at 1 client, < 10 ms at 16:",
        "",
        "| gateway | model latency | clients | server-side p50 ms | server-side p99 ms "
        "| seen by the client, p50 ms | in the pipeline run, p50 ms | model time p50 ms "
        "| model calls/reply | gateway CPU ms/reply |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for o in overheads:
        out.append(
            f"| {o['gateway']} | {o['model_latency_ms']} ms | {o['clients']} "
            f"| {o['server_overhead_p50_ms']} "
            f"| {o['server_overhead_p99_ms']} | {o['client_overhead_p50_ms']} "
            f"| {o['in_run_overhead_p50_ms']} | {o['model_p50_ms']} "
            f"| {o['model_calls_per_reply']} | {_cpu(o['gateway_cpu_ms_per_reply'])} |"
        )
    return out


def _speculation_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out = [
        "",
        "Speculative draft, L0-escalating message (L1, draft, review), 1 client:",
        "",
        "| model latency | mode | p50 ms | p99 ms | model calls/reply "
        "| model time on the path, p50 ms | model time summed, p50 ms | failed |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['model_latency_ms']} ms | {r['mode']} | {r['p50_ms']} | {r['p99_ms']} "
            f"| {r['model_calls_per_reply']} | {r['model_time_on_path_p50_ms']} "
            f"| {r['model_time_summed_p50_ms']} | {r['failures']} |"
        )
    by = {(r["model_latency_ms"], r["mode"]): r for r in rows}
    for latency in sorted({r["model_latency_ms"] for r in rows}):
        seq, spec = by.get((latency, "sequential")), by.get((latency, "speculative"))
        if seq and spec:
            saved = seq["p50_ms"] - spec["p50_ms"]
            out.append(
                f"\nAt {latency} ms per call the speculative draft saves {saved:.1f} ms p50 "
                f"({saved / seq['p50_ms']:.0%} of the sequential p50)."
            )
    return out


def report(env: Mapping[str, Any], argv: Sequence[str], results: Mapping[str, Any]) -> str:
    """The whole run as Markdown: the command, the machine, then every table."""
    cells: list[Cell] = results["cells"]
    out = [
        "Command: `" + shlex.join(["python", "benchmarks/gateway.py", *argv]) + "`",
        "",
        "Machine: {cpus} CPUs shared by every process, Python {python}; foureyes {foureyes} "
        "({commit}), "
        "aiohttp {aiohttp} (the bare client of every HTTP server), nemoguardrails "
        "{nemoguardrails}; load average "
        "{load_avg_start} at start, {load_avg_end} at end".format(**env),
    ]
    out += _headline_table(cells)
    out += _peer_table(cells)
    out += _throughput_tables(cells)
    out += _ratio_table(cells)
    if results["overheads"]:
        out += _overhead_table(results["overheads"])
    if results["speculation"]:
        out += _speculation_table(results["speculation"])
    return "\n".join(out)


def as_json(
    env: Mapping[str, Any], args: Mapping[str, Any], results: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "environment": dict(env),
        "argv": sys.argv[1:],
        "options": {k: str(v) for k, v in args.items()},
        "cells": [c.summary() for c in results["cells"]],
        "medians": [
            {"system": k[0], "model_latency_ms": k[1], "clients": k[2]} | v
            for k, v in medians(results["cells"]).items()
        ],
        "overheads": results["overheads"],
        "speculation": results["speculation"],
    }
