"""``foureyes trace show ID``: which text, based on which data and rules, was allowed out.

The readable view answers that question from the run's decision record: the text that
went out (by digest, and in full when code rendered it), the data the review was based
on, the rules in force and those that fired, every draft and its verdict, the model calls,
and if no candidate went out, why not. ``--json`` prints the whole record.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.table import Table

from foureyes.cli._common import ConfigOption, JsonOption, console, emit_json, fail, load, run
from foureyes.config import Config
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import FoureyesError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.core.trace import EventKind, TraceRecord
from foureyes.gate import RECORD_SCHEMA, fallback_text
from foureyes.risk.resources import render_resources
from foureyes.store import Store

__all__ = ["TraceNotFound", "app", "show"]

app = typer.Typer(no_args_is_help=True, help="Read recorded runs.")

TraceId = Annotated[str, typer.Argument(help="The trace id (32 hex characters).")]

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


async def _read(config: Config, trace_id: str) -> TraceRecord:
    store = await Store.open(config.store, config.privacy, os.environ)
    try:
        record = await store.traces.get(trace_id)
    finally:
        await store.close()
    if record is None:
        raise TraceNotFound(trace_id)
    return record


@app.command("show")
def show(trace_id: TraceId, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show which text a run let out, based on which data and rules, and if none, why not.

    Exits 1 when the config is invalid, the store cannot be read or the trace is unknown.
    """
    cfg = load(config, as_json=as_json)
    try:
        record = run(_read(cfg, trace_id))
    except FoureyesError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, **record.as_json()})
        return
    _print_header(record)
    decisions = [e.data for e in record.events if e.kind is EventKind.DECISION]
    gate = [d for d in decisions if d.get("schema") == RECORD_SCHEMA]
    for data in gate:
        _print_decision(data, record.run.input_fingerprint)
    _print_calls(record)
    if not gate:
        for event in record.events:
            if event.kind is not EventKind.MODEL_CALL:
                _out(f"{event.kind.value} ({event.stage}): {dict(event.data)}", markup=False)


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


def _rendered(part: Mapping[str, Any], data: Mapping[str, Any]) -> str | None:
    """A code-rendered part rebuilt by code, if its digest matches the record's."""
    locale = Locale(data["locale"])
    if part["kind"] == "fallback":
        text = fallback_text(ReasonCode(data["reason"]), locale)
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
    console.print(table)
