"""``foureyes trace``: the recorded runs, listed and shown.

``trace list`` prints the recent runs, newest first (id, start, purpose, tenant, outcome,
reason, risk level), with the console's filters: purpose (chat runs by default, apart from
eval runs), reason, risk level, and a date range; and by tenant (``key:<key id>`` for a
server's API key, ``local`` for the CLI, the library and open loopback).

``trace show ID`` answers which text, based on which data and rules, was allowed out,
from the run's records: the triage (status, level, tier, path, the L0 matches by
category and span), the text that went out (by digest, and in full when code rendered
it), the data the review was based on, the rules in force and those that fired, every
draft and its verdict, the model calls, and if no candidate went out, why not. ``ID`` may
be a unique prefix of the id. ``--json`` prints the whole record, and what the readable
view sums up as its ``summary`` (:func:`summary`).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import typer

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    emit_json,
    fail,
    load,
    print_rows,
    print_table,
    run,
)
from foureyes.config import Config
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import FoureyesError, UsageError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.core.trace import EventKind, TraceRecord
from foureyes.store.sqlite_read import list_runs_at_head
from foureyes.store.trace_list import MAX_LIST, TENANT_MAX, RunFilter, RunSummary

# The gate, the risk resources and rich's tables are imported by `show` alone: `trace
# list` needs only the config and the store, and on an SQLite store at head not even the
# store's async engine (benchmarks/README.md, "Starting the command line").

__all__ = ["AmbiguousTraceId", "TraceNotFound", "app", "list_runs", "show", "summary"]

app = typer.Typer(no_args_is_help=True, help="Read recorded runs.")

TraceId = Annotated[
    str, typer.Argument(help="The trace id (32 hex characters), or a unique prefix of it.")
]
_Purpose = Literal["chat", "eval", "other", "all"]
_Level = Literal["low", "medium", "high", "critical", "unknown", "unscreened"]

_WHY = {
    ReasonCode.REJECTED: "the Supervisor rejected the candidate",
    ReasonCode.INSUFFICIENT: "the Supervisor said it could not judge with what it was shown",
    ReasonCode.REVIEW_TIMEOUT: "the Supervisor gave no answer in time",
    ReasonCode.REVIEW_FAILED: "the Supervisor's route failed",
    ReasonCode.REVIEW_MALFORMED: "the verdict broke its contract",
    ReasonCode.VERDICT_MISMATCH: "the verdict named a digest other than the candidate's",
    ReasonCode.RULE_VIOLATION: "a rule checked in code fired on the candidate",
    ReasonCode.DRAFT_FAILED: "the Counselor produced no usable draft",
    ReasonCode.GENERATION_PROHIBITED: "triage prohibited free generation",
    ReasonCode.DEADLINE_EXCEEDED: "the run's deadline passed before a decision",
    ReasonCode.BUDGET_EXHAUSTED: "a call or spend budget ran out before a decision",
    ReasonCode.TOOL_NOT_ALLOWED: "the candidate calls a tool the gate does not allow",
}


class TraceNotFound(FoureyesError):
    """Raised when the store holds no run with the requested id."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        super().__init__(f"no trace {trace_id!r} in the store")


class AmbiguousTraceId(FoureyesError):
    """Raised when a short trace id is the prefix of more than one run's id."""

    def __init__(self, prefix: str, matches: Sequence[str]) -> None:
        self.prefix = prefix
        self.matches = tuple(matches)
        super().__init__(
            f"{prefix!r} is the prefix of more than one trace ({', '.join(self.matches)}, ...):"
            " give more of the id"
        )


async def _read(config: Config, trace_id: str) -> TraceRecord:
    from foureyes.store import Store

    store = await Store.open(config.store, config.privacy, os.environ)
    try:
        try:
            matches = await store.traces.ids_with_prefix(trace_id.lower())
        except UsageError:
            raise TraceNotFound(trace_id) from None
        if len(matches) > 1:
            raise AmbiguousTraceId(trace_id, matches)
        record = await store.traces.get(matches[0]) if matches else None
    finally:
        await store.close()
    if record is None:
        raise TraceNotFound(trace_id)
    return record


def _tenant(value: str | None) -> str | None:
    if value is not None and not 1 <= len(value) <= TENANT_MAX:
        raise typer.BadParameter(f"a tenant has 1 to {TENANT_MAX} characters (key:<key id>)")
    return value


def _day_bound(value: str | None, *, end: bool) -> dt.datetime | None:
    """A ``--since``/``--until`` value: a day (UTC, whole days) or an ISO time with a zone."""
    if value is None:
        return None
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        pass
    else:
        midnight = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
        return midnight + dt.timedelta(days=1) if end else midnight
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise typer.BadParameter(
            f"{value!r}: give a day (2026-11-30) or a time with a zone (2026-11-30T12:00:00Z)"
        )
    return moment


def _list(config: Config, where: RunFilter, limit: int) -> list[RunSummary]:
    # An SQLite store at head is read by the same query without opening it; any other
    # is opened (and migrated, or its failure reported) as every command opens it.
    runs = list_runs_at_head(config.store, config.privacy, where, limit=limit)
    return runs if runs is not None else run(_open_and_list(config, where, limit))


async def _open_and_list(config: Config, where: RunFilter, limit: int) -> list[RunSummary]:
    from foureyes.store import Store

    store = await Store.open(config.store, config.privacy, os.environ)
    try:
        return await store.traces.list_runs(where, limit=limit)
    finally:
        await store.close()


@app.command("list")
def list_runs(
    config: ConfigOption = None,
    purpose: Annotated[
        _Purpose,
        typer.Option(help="chat: support messages; eval: eval, test and calibration runs."),
    ] = "chat",
    tenant: Annotated[
        str | None,
        typer.Option(
            callback=_tenant, help="Runs of this tenant: key:<key id> (a server key), local."
        ),
    ] = None,
    reason: Annotated[str | None, typer.Option(help="Runs finished with this reason.")] = None,
    risk_level: Annotated[
        _Level | None, typer.Option(help="Runs whose triage found this level (or status).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="From this day (UTC) or ISO time with a zone.")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="To the end of this day (UTC), or before this time.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_LIST, help="At most this many.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """List the recent runs, newest first, with the console's filters, and their tenants.

    Exits 2 when an option is invalid (a time without a zone, an empty tenant), 1 when
    the config is invalid or the store cannot be read.
    """
    where = RunFilter(
        purpose=None if purpose == "all" else purpose,
        tenant=tenant,
        reason=reason,
        risk_level=risk_level,
        since=_day_bound(since, end=False),
        until=_day_bound(until, end=True),
    )
    cfg = load(config, as_json=as_json)
    try:
        runs = _list(cfg, where, limit)
    except FoureyesError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "data": [summary.as_json() for summary in runs]})
        return
    if not runs:
        _out("no runs match", markup=False)
        return
    # Plain lines, not a table: an id must stay whole at any terminal width.
    rows = [("trace", "started", "purpose", "kind", "tenant", "outcome", "reason", "risk")]
    rows += [
        (
            summary.trace_id,
            summary.started_at.isoformat(timespec="seconds"),
            summary.purpose,
            summary.kind,
            summary.tenant,
            summary.outcome or "-",
            summary.reason or "-",
            _risk(summary),
        )
        for summary in runs
    ]
    print_rows(rows)


def _risk(summary: RunSummary) -> str:
    if summary.risk_status is None:
        return "-"
    return f"{summary.risk_level or summary.risk_status} {summary.risk_tier}"


@app.command("show")
def show(trace_id: TraceId, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show which text a run let out, based on which data and rules, and if none, why not.

    Exits 1 when the config is invalid, the store cannot be read or the trace is unknown.
    """
    from foureyes.gate import RECORD_SCHEMA

    cfg = load(config, as_json=as_json)
    try:
        record = run(_read(cfg, trace_id))
    except FoureyesError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, **record.as_json(), "summary": summary(record)})
        return
    _print_header(record)
    _print_triage(record)
    decisions = [e.data for e in record.events if e.kind is EventKind.DECISION]
    gate = [d for d in decisions if d.get("schema") == RECORD_SCHEMA]
    for data in gate:
        _print_decision(data, record.run.input_fingerprint)
    _print_calls(record)
    if not gate:
        for event in record.events:
            if event.kind is not EventKind.MODEL_CALL:
                _out(f"{event.kind.value} ({event.stage}): {dict(event.data)}", markup=False)


def _triage(record: TraceRecord) -> Mapping[str, Any] | None:
    return next(
        (
            e.data
            for e in reversed(record.events)
            if e.kind is EventKind.RISK and e.stage == "triage"
        ),
        None,
    )


def summary(record: TraceRecord) -> dict[str, Any]:
    """What the readable view of ``trace show`` sums up, as the ``summary`` of ``--json``.

    The run's outcome and reason (and why nothing went out), the triage, what the gate
    let out (its last decision: the candidate, the verdict that approved it, the fallback,
    the delivered text's digest), on what basis (policy, locale, region, sources, rules
    fired), and the counts: gate decisions, drafts, model calls with their tokens and
    cost, and the time. A key the run did not reach (no triage, no gate decision) is
    ``None``.
    """
    from foureyes.gate import RECORD_SCHEMA

    run_header = record.run
    reason = run_header.reason
    known = {code.value: code for code in ReasonCode}
    why = _WHY.get(known[reason]) if run_header.outcome != "released" and reason in known else None
    triage = _triage(record)
    gate = [
        e.data
        for e in record.events
        if e.kind is EventKind.DECISION and e.data.get("schema") == RECORD_SCHEMA
    ]
    last: Mapping[str, Any] = gate[-1] if gate else {}
    attempts: Sequence[Mapping[str, Any]] = last.get("attempts", ())
    verdict = next((a["review"] for a in reversed(attempts) if a.get("review")), None)
    released = last.get("outcome") == "released"
    calls = [e.data for e in record.events if e.kind is EventKind.MODEL_CALL]

    def total(key: str) -> int | float | None:
        values = [d[key] for d in calls if isinstance(d.get(key), int | float)]
        return sum(values) if values else None

    timings = last.get("timings", {})
    return {
        "outcome": run_header.outcome,
        "reason": reason,
        "why": why,
        "policy": last.get("policy", triage["policy"] if triage else None),
        "locale": last.get("locale"),
        "region": last.get("region"),
        "risk": None
        if triage is None
        else {
            "level": triage["level"],
            "status": triage["status"],
            "tier": triage["tier"],
            "confirmed": triage["confirmed"],
            "path": triage["path"],
        },
        "decision": last.get("outcome"),
        "candidate_sha256": last.get("candidate_sha256") if released else None,
        "verdict_sha256": verdict["verdict_sha256"] if released and verdict else None,
        "reviewer_route": verdict["route"] if released and verdict else None,
        "reviewer_offline": verdict["offline"] if released and verdict else None,
        "fallback_family": None if released or not gate else last.get("fallback_family"),
        "delivered_sha256": last.get("delivered_sha256"),
        "delivered_chars": last.get("delivered_chars"),
        "sources": len(last["context"]["sources"]) if gate else None,
        "rules_fired": sorted(
            {fired["rule"] for attempt in attempts for fired in attempt["rules_fired"]}
        ),
        "gate_decisions": len(gate),
        "drafts": len(attempts),
        "model_calls": len(calls),
        "prompt_tokens": total("prompt_tokens"),
        "completion_tokens": total("completion_tokens"),
        "cost_usd": total("cost_usd"),
        "total_ms": timings.get("total_ms"),
        "model_ms": timings.get("model_ms"),
        "gate_ms": timings.get("gate_ms"),
    }


def _out(text: str, **options: Any) -> None:
    # Digests and rendered text must stay whole: a wrapped line is a different line.
    console.print(text, soft_wrap=True, **options)


def _print_header(record: TraceRecord) -> None:
    header = record.run
    _out(f"[bold]trace {header.trace_id}[/]  {header.kind}", highlight=False)
    if header.conversation_id:
        _out(f"conversation {header.conversation_id}", markup=False)
    finished = header.finished_at.isoformat() if header.finished_at else "not finished"
    _out(f"started {header.started_at.isoformat()}, {finished}", markup=False)
    if header.outcome:
        _out(f"outcome {header.outcome} ({header.reason})", markup=False)


def _print_triage(record: TraceRecord) -> None:
    triage = _triage(record)
    if triage is None:
        return
    out = _out
    out("")
    confirmed = ", confirmed" if triage["confirmed"] else ""
    out(
        f"Triage: level {triage['level'] or '-'}, status {triage['status']}{confirmed}, "
        f"tier {triage['tier']}, path {triage['path'] or 'stopped at L0'}",
        markup=False,
    )
    out(
        f"  policy {triage['policy']}, reasons: {', '.join(triage['reasons']) or 'none'}",
        markup=False,
    )
    l0 = triage["l0"]
    matches = ", ".join(f"{m['category']}@{m['start']}-{m['end']}" for m in l0["matches"])
    out(
        f"  L0: score {l0['score']}, {'escalated' if l0['escalate'] else 'not escalated'}, "
        f"matches: {matches or 'none'}",
        markup=False,
    )


def _rendered(part: Mapping[str, Any], data: Mapping[str, Any]) -> str | None:
    """A code-rendered part rebuilt by code, if its digest matches the record's."""
    from foureyes.gate import ReplyMode, fallback_text
    from foureyes.risk.resources import render_resources

    locale = Locale(data["locale"])
    if part["kind"] == "fallback":
        # The built-in wording of the run's mode; a team's own (gate.texts_file) is not
        # kept here, so its digest does not match and it is not shown.
        wording = data.get("fallback_wording") or {}
        mode = ReplyMode(wording.get("mode", ReplyMode.SUPPORT))
        text = fallback_text(ReasonCode(data["reason"]), locale, mode=mode)
    elif part["kind"] == "resources":
        text = render_resources(locale, data["region"])
    else:
        return None
    return text if sha256_hex(text) == part["sha256"] else None


def _print_decision(data: Mapping[str, Any], fingerprint: str | None) -> None:
    out = _out
    out("")
    if data["outcome"] == "released":
        verdict = next(
            (a["review"] for a in reversed(data["attempts"]) if a["review"] is not None), None
        )
        out(f"[green]Allowed out[/]: the candidate {data['candidate_sha256']}", highlight=False)
        if verdict is not None:
            offline = " (offline, rules only)" if verdict["offline"] else ""
            out(
                f"  approved by verdict {verdict['verdict_sha256']} "
                f"from route {verdict['route']}{offline}",
                markup=False,
            )
    else:
        reason = ReasonCode(data["reason"])
        out(
            f"[red]No candidate was allowed out[/]: {reason.value}: {_WHY[reason]}", highlight=False
        )
        out(f"  instead: the restricted fallback ({data['fallback_family']})", markup=False)
    for part in data["parts"]:
        out(f"  part {part['kind']}: sha256 {part['sha256']} ({part['chars']} chars)", markup=False)
        text = _rendered(part, data)
        if text is not None:
            out("    rendered by code, digest verified:", markup=False)
            for line in text.splitlines():
                out(f"      {line}", markup=False, highlight=False)
    out(
        f"  delivered sha256 {data['delivered_sha256']} ({data['delivered_chars']} chars)",
        markup=False,
    )
    _print_basis(data, fingerprint)


def _texts(texts: Sequence[str | None]) -> str:
    """Model-written texts, each one not kept (privacy, retention) shown as such."""
    return "; ".join("(text not kept)" if text is None else text for text in texts)


def _print_basis(data: Mapping[str, Any], fingerprint: str | None) -> None:
    out = _out
    context = data["context"]
    out("Based on:", markup=False)
    out(
        f"  policy {data['policy']}, locale {data['locale']}, region {data['region']}", markup=False
    )
    out(f"  user message: fingerprint {fingerprint}", markup=False)
    out(
        f"  earlier turns: {context['earlier_turns_shown']} shown, "
        f"{context['earlier_turns_omitted']} left out",
        markup=False,
    )
    sources = ", ".join(f"{s['id']} ({s['origin']})" for s in context["sources"]) or "none"
    out(f"  sources: {sources}", markup=False)
    out(f"  open unknowns: {_texts(context['open_unknowns']) or 'none'}", markup=False)
    if context["unknowns_added"]:
        out(f"  unknowns kept open: {_texts(context['unknowns_added'])}", markup=False)
    if context.get("unknowns_resolved"):
        out(f"  unknowns resolved by the verdict: {context['unknowns_resolved']}", markup=False)
    out(
        f"  Counselor summary shown: {'yes' if context['counselor_summary'] else 'no'}",
        markup=False,
    )
    out(f"Rules in force: {', '.join(context['rules'])}", markup=False)
    for attempt in data["attempts"]:
        fired = ", ".join(f"{f['rule']}@{f['span']}" for f in attempt["rules_fired"]) or "none"
        review = attempt["review"]
        judged = (
            f"verdict {review['verdict']['decision']} ({review['verdict_sha256'][:12]})"
            if review
            else "no verdict"
        )
        out(
            f"  draft {attempt['revision']}: {attempt['candidate_sha256'] or 'none'} "
            f"rules fired: {fired}; {judged} -> {attempt['reason']}"
            + (f" [{attempt['error']}]" if attempt["error"] else ""),
            markup=False,
        )
    timings = data["timings"]
    out(
        f"Time: {timings['total_ms']} ms ({timings['model_ms']} ms in model calls, "
        f"{timings['gate_ms']} ms the gate's own)",
        markup=False,
    )


def _print_calls(record: TraceRecord) -> None:
    from rich.table import Table

    calls = [e for e in record.events if e.kind is EventKind.MODEL_CALL]
    if not calls:
        return
    table = Table(title="model calls")
    for column in ("stage", "role", "route", "ms", "tokens in/out", "cost USD", "outcome"):
        table.add_column(column)
    for event in calls:
        d = event.data
        table.add_row(
            event.stage,
            str(d.get("role")),
            str(d.get("route")),
            str(d.get("latency_ms")),
            f"{d.get('prompt_tokens', '-')}/{d.get('completion_tokens', '-')}",
            str(d.get("cost_usd")),
            str(d.get("outcome")),
        )
    print_table(table)
