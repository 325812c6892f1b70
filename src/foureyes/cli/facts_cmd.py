"""``foureyes facts ...``: evidence-bound durable facts from the command line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    emit_json,
    fail,
    load,
    print_table,
    run,
)
from foureyes.config import Config, validation_problems
from foureyes.core.errors import ConfigError, StoreError
from foureyes.core.locale import Locale

if TYPE_CHECKING:
    from foureyes.evidence import FactsOutcome, FactsRequest, JsonFileCatalogSource, KindRegistry

app = typer.Typer(no_args_is_help=True, help="Evidence-bound durable facts.")

_NOBODY = "(none)"
"""The subject asked for when neither ``--subject`` nor the catalog names one."""


@app.command("select")
def select(
    catalog: Annotated[
        Path, typer.Option("--catalog", help="Evidence catalog JSON file.", dir_okay=False)
    ],
    kinds: Annotated[
        Path, typer.Option("--kinds", help="Observation kinds TOML file.", dir_okay=False)
    ],
    task: Annotated[str, typer.Option(help="What the selection serves.")] = "",
    locale: Annotated[Locale, typer.Option(help="Locale of the rendered facts.")] = Locale.ZH_HANS,
    subject: Annotated[
        str | None,
        typer.Option(
            help="Whom the facts are about; it must be the catalog's own `subject` "
            "(default: the catalog's).",
        ),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Also ask for an explanation (never stored).")
    ] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the selector over the catalog, validate, render, and commit to the store.

    Prints the accepted observations (rendered by code) and the rejected selections with
    their reasons. Exits 1 when the files are bad, the selector gives no usable answer,
    the commit is refused (the catalog changed), or the store fails.
    """
    # Imported here so that other commands do not pay for SQLAlchemy and the evidence code.
    from pydantic import ValidationError

    from foureyes.evidence import CatalogError, FactsRequest, JsonFileCatalogSource, KindRegistry

    def request_for(named: str | None) -> FactsRequest:
        try:
            # A catalog that names nobody is refused by the owner (subject_unbound).
            return FactsRequest(
                subject=subject if subject is not None else named or _NOBODY,
                task=task,
                locale=locale,
                explain=explain,
            )
        except ValidationError as exc:
            raise typer.BadParameter("; ".join(validation_problems(exc))) from None

    request_for(None)  # a bad --subject is a usage error before any file is read
    cfg = load(config, as_json=as_json)
    try:
        registry = KindRegistry.from_file(kinds)
        outcome = run(_select(cfg, JsonFileCatalogSource(catalog), registry, request_for))
    except (ConfigError, CatalogError, StoreError) as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json(outcome.to_json())
    else:
        _show(outcome)
    if not outcome.ok:
        raise typer.Exit(1)


async def _select(
    cfg: Config,
    source: JsonFileCatalogSource,
    kinds: KindRegistry,
    request_for: Callable[[str | None], FactsRequest],
) -> FactsOutcome:
    from foureyes.evidence import DurableOwner, EvidenceSelector, select_facts
    from foureyes.llm.calls import ModelCaller
    from foureyes.llm.routes import Routes
    from foureyes.store import Store

    shown = await source.read()
    request = request_for(shown.subject)
    cfg.require_secrets(os.environ)
    routes = Routes.build(cfg, os.environ)
    try:
        async with await Store.open(cfg.store, cfg.privacy, os.environ) as store:
            caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
            owner = DurableOwner(source, kinds, store.observations)
            return await select_facts(
                shown,
                request,
                selector=EvidenceSelector(caller, kinds),
                owner=owner,
                traces=store.traces,
            )
    finally:
        await routes.aclose()


def _show(outcome: FactsOutcome) -> None:
    body = outcome.to_json()
    colour = "green" if outcome.ok else "red"
    console.print(f"[{colour}]{body['status']}[/] snapshot {body['snapshot_id']}", highlight=False)
    if body["accepted"]:
        table = Table(title="accepted (rendered by code)")
        for name in ("kind", "evidence_ref", "label", "description"):
            table.add_column(name)
        for entry in body["accepted"]:
            table.add_row(
                entry["kind"], entry["evidence_ref"], entry["label"], entry["description"]
            )
        print_table(table)
    if body["rejected"]:
        table = Table(title="rejected")
        table.add_column("#")
        table.add_column("reason")
        table.add_column("selection (as the model wrote it)")
        for entry in body["rejected"]:
            table.add_row(str(entry["index"]), entry["reason"], str(entry["selection"])[:200])
        print_table(table)
    if body["detail"]:
        console.print(body["detail"], markup=False, highlight=False)
    if body["explanation"]:
        console.print("explanation (model text, not stored):", style="dim")
        console.print(body["explanation"]["text"], markup=False, highlight=False)
    console.print(f"trace {body['trace_id']}", style="dim")
