"""``foureyes store ...``: maintenance of the store the config names.

``purge`` erases the text whose retention has run out (``[privacy]``): raw user input,
and model-written text that may restate it (a verdict's notes and missing items, open
unknowns). ``foureyes serve`` does the same every ``privacy.purge_interval_s``; the
command is for deployments that schedule it themselves (cron) or want it done now.
"""

from __future__ import annotations

import os

import typer

from foureyes.cli._common import ConfigOption, JsonOption, console, emit_json, fail
from foureyes.cli._common import load as load_config
from foureyes.cli._common import run as run_async
from foureyes.core.errors import ConfigError, StoreError
from foureyes.store import PurgeCounts, Store

__all__ = ["app", "purge"]

app = typer.Typer(no_args_is_help=True, help="Maintain the store.")


@app.command("purge")
def purge(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Erase raw and model-written text past its retention; print how much was erased.

    Safe to run while ``foureyes serve`` runs, on several machines at once, and again:
    a second run finds nothing left. Exits 1 when the config is invalid or the store
    cannot be opened or written.
    """
    cfg = load_config(config, as_json=as_json)

    async def go() -> PurgeCounts:
        async with await Store.open(cfg.store, cfg.privacy, os.environ) as store:
            return await store.traces.purge_expired()

    try:
        counts = run_async(go())
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, **counts.as_json()})
        return
    console.print(
        f"purged {counts.total}: raw input of {counts.inputs} runs, {counts.texts} model-written "
        f"texts of traces, the text of {counts.unknowns} open unknowns "
        f"({counts.batches} transactions)",
        markup=False,
        highlight=False,
    )
