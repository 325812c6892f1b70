"""``foureyes assess``: triage one text, or a JSONL file of texts in one process."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from foureyes.cli._common import ConfigOption, JsonOption, console, fail, load, print_table, run
from foureyes.config import Config
from foureyes.core.errors import ConfigError, StoreError
from foureyes.core.policy import GenerationPolicy
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.risk.l0 import L0Gate
from foureyes.risk.resources import render_resources
from foureyes.risk.result import TriageResult
from foureyes.risk.triage import Triage, TriageRequest
from foureyes.store import Store


@contextlib.asynccontextmanager
async def open_triage(cfg: Config) -> AsyncIterator[Triage]:
    """A triage over the configured store and routes, closed when the block ends.

    Raises:
        ConfigError: a route cannot be built or the store URL is unusable.
        StoreError: the store cannot be opened.
    """
    store = await Store.open(cfg.store, cfg.privacy, os.environ)
    try:
        routes = Routes.build(cfg, os.environ)
        try:
            caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
            yield Triage(cfg, caller, store.assessments, L0Gate.default())
        finally:
            await routes.aclose()
    finally:
        await store.close()


def result_document(result: TriageResult, cfg: Config) -> dict[str, Any]:
    """The JSON printed for one triage.

    The full result, plus code-rendered resources when the policy calls for them.
    """
    document = {"ok": True} | result.as_dict(with_evidence=True)
    if result.policy is not GenerationPolicy.NORMAL:
        document["resources"] = render_resources(result.locale, cfg.gate.region)
    return document


def assess(
    text: Annotated[str | None, typer.Argument(help="The text to triage.")] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            help="JSONL file: one object per line with `text` and optional `conversation_id`.",
            dir_okay=False,
        ),
    ] = None,
    conversation_id: Annotated[
        str | None, typer.Option("--conversation-id", help="Conversation the text belongs to.")
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Triage TEXT (or every line of --file): L0 keywords, then L1/L2 assessments.

    Prints the status, level, confirmation, tier, keyword categories and spans, each
    tier's assessment, the reasons and the generation policy. A failed assessment is a
    result (status unknown, with its reason), not an error; exit status 1 means the
    command itself failed (bad config, unreadable file, malformed line, store down).
    """
    if (text is None) == (file is None):
        raise typer.BadParameter("give either TEXT or --file, not both and not neither")
    cfg = load(config, as_json=as_json)
    try:
        if file is not None:
            ok = run(_assess_file(cfg, file, as_json=as_json))
            if not ok:
                raise typer.Exit(1)
            return
        assert text is not None
        conversation = conversation_id or f"cli:{secrets.token_hex(8)}"
        result = run(_assess_one(cfg, text, conversation))
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
    document = result_document(result, cfg)
    if as_json:
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True))
    else:
        _show(document)


async def _assess_one(cfg: Config, text: str, conversation_id: str) -> TriageResult:
    async with open_triage(cfg) as triage:
        return await triage.assess(TriageRequest(text=text, conversation_id=conversation_id))


async def _assess_file(cfg: Config, path: Path, *, as_json: bool) -> bool:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read {str(path)!r}: {exc}"]) from None
    batch = secrets.token_hex(4)
    ok = True
    async with open_triage(cfg) as triage:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                request = _request(line, f"cli:{batch}:{number}")
            except ValueError as exc:
                ok = False
                _emit_line({"ok": False, "line": number, "error": str(exc)}, as_json=as_json)
                continue
            result = await triage.assess(request)
            _emit_line({"line": number} | result_document(result, cfg), as_json=as_json)
    return ok


def _request(line: str, default_conversation: str) -> TriageRequest:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise ValueError("expected an object with a string `text`")
    conversation = data.get("conversation_id", default_conversation)
    if not isinstance(conversation, str) or not conversation:
        raise ValueError("`conversation_id` must be a non-empty string")
    return TriageRequest(text=data["text"], conversation_id=conversation)


def _emit_line(document: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(document, ensure_ascii=False, sort_keys=True))
    elif not document["ok"]:
        console.print(f"line {document['line']}: [red]{document['error']}[/]", highlight=False)
    else:
        level = document["level"] or "-"
        reasons = ",".join(document["reasons"]) or "-"
        console.print(
            f"line {document['line']}: {document['status']} {level} tier {document['tier']} "
            f"confirmed={document['confirmed']} policy={document['policy']} reasons={reasons}",
            highlight=False,
            markup=False,
        )


def _show(document: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = [
        ("status", document["status"]),
        ("level", document["level"] or "-"),
        ("confirmed", "yes" if document["confirmed"] else "no"),
        ("tier", document["tier"]),
        ("policy", document["policy"]),
        ("reasons", ", ".join(document["reasons"]) or "-"),
    ]
    l0 = document["l0"]
    rows.append(("L0", f"escalate={l0['escalate']} score={l0['score']:g}"))
    rows += [
        ("", f"{m['category']} {m['term']!r} [{m['start']}, {m['end']})") for m in l0["matches"]
    ]
    for tier in ("l1", "l2"):
        assessment = document[tier]
        if assessment is None:
            continue
        flags = [k for k, v in assessment["context_flags"].items() if v] or ["-"]
        offline = " offline" if assessment["offline"] else ""
        rows.append(
            (
                tier.upper(),
                f"{assessment['level']} (reported {assessment['reported_level']}) "
                f"confidence={assessment['confidence']:g} flags={','.join(flags)}{offline}",
            )
        )
        rows.append(("", f"evidence: {assessment['evidence']}"))
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    for name, value in rows:
        # Text, not markup: evidence and terms come from models and users.
        table.add_row(Text(name), Text(value))
    print_table(table)
    if "resources" in document:
        console.print(document["resources"], markup=False, highlight=False)
