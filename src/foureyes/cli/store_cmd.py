"""``foureyes store ...``: maintenance of the store the config names.

``purge`` erases the text whose retention has run out (``[privacy]``): raw user input,
and model-written text that may restate it (a verdict's notes and missing items, open
unknowns). ``foureyes serve`` does the same every ``privacy.purge_interval_s``; the
command is for deployments that schedule it themselves (cron) or want it done now.

``init-roles`` (PostgreSQL) migrates the store as the config's ``store.url`` role (the
administrator that will own the tables) and creates the gateway and owner roles of
:mod:`foureyes.store.roles`: then serve with ``store.url`` as the gateway role and
``[evidence] owner_url`` as the owner role.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from foureyes.cli._common import ConfigOption, JsonOption, console, emit_json, fail
from foureyes.cli._common import load as load_config
from foureyes.cli._common import run as run_async
from foureyes.core.errors import ConfigError, StoreError, UsageError
from foureyes.store import PurgeCounts, Store
from foureyes.store._database import Database
from foureyes.store.roles import init_roles

__all__ = ["app", "init_roles_command", "purge"]

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


@app.command("init-roles")
def init_roles_command(
    config: ConfigOption = None,
    as_json: JsonOption = False,
    gateway: Annotated[
        str, typer.Option(help="Role of the gateway: reads observations, cannot write them.")
    ] = "foureyes_gateway",
    owner: Annotated[
        str, typer.Option(help="Role of the durable owner: the only writer of observations.")
    ] = "foureyes_owner",
) -> None:
    """Create the gateway and owner roles on the PostgreSQL store and grant their rights.

    Run it as the role that owns the store's tables. Roles are created without a
    password; set one with ALTER ROLE. Safe to run again. Exits 1 when the config is
    invalid, the store is not PostgreSQL, or a statement fails (nothing is granted).
    """
    cfg = load_config(config, as_json=as_json)

    async def go() -> None:
        async with await Store.open(cfg.store, cfg.privacy, os.environ):
            pass  # migrated to head as the administrator
        db = Database.create(cfg.store.url, timeout_s=cfg.store.timeout_s)
        try:
            await init_roles(db, gateway, owner)
        finally:
            await db.dispose()

    try:
        run_async(go())
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
    except UsageError as exc:  # not PostgreSQL, or an unusable role name
        fail(ConfigError([str(exc)]), as_json=as_json)
    if as_json:
        emit_json({"ok": True, "gateway": gateway, "owner": owner})
        return
    console.print(
        f"roles ready: {gateway} reads observations, {owner} alone inserts them",
        markup=False,
        highlight=False,
    )
