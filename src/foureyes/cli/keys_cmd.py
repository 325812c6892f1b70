"""``foureyes keys ...``: create, list and revoke the API keys of ``foureyes serve``.

The commands work on the store the config names, so they reach a running service
through its database: a new key works at once, a revoked one stops working within
``server.key_cache_s`` seconds.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    emit_json,
    err_console,
    fail,
    print_table,
)
from foureyes.cli._common import load as load_config
from foureyes.cli._common import run as run_async
from foureyes.config import Config
from foureyes.core.errors import ConfigError, StoreError
from foureyes.store import Store
from foureyes.store.api_keys import KeyScope, RevokeOutcome, SqlApiKeys

__all__ = ["app", "create", "list_keys", "revoke"]

T = TypeVar("T")

app = typer.Typer(no_args_is_help=True, help="Create, list and revoke API keys.")


def _name(value: str | None) -> str | None:
    if value is not None and not (0 < len(value.strip()) <= 128):
        raise typer.BadParameter("a key name must have 1 to 128 characters")
    return value


def _with_keys(cfg: Config, action: Callable[[SqlApiKeys], Awaitable[T]], as_json: bool) -> T:
    async def go() -> T:
        async with await Store.open(cfg.store, cfg.privacy, os.environ) as store:
            return await action(store.api_keys)

    try:
        return run_async(go())
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)


@app.command("create")
def create(
    admin: Annotated[
        bool, typer.Option("--admin", help="Admin scope (traces, console, keys, metrics).")
    ] = False,
    name: Annotated[
        str | None, typer.Option(help="A name to tell the key apart.", callback=_name)
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a key and print it once: only its SHA-256 is stored, it cannot be shown again."""
    cfg = load_config(config, as_json=as_json)
    scope = KeyScope.ADMIN if admin else KeyScope.CLIENT
    new = _with_keys(cfg, lambda keys: keys.create(scope=scope, name=name), as_json)
    if as_json:
        emit_json({"ok": True, "key": new.key, **new.record.as_json()})
        return
    console.print(new.key, markup=False, highlight=False, soft_wrap=True)
    err_console.print(
        f"{scope.value} key {new.record.prefix} created; it is shown only this once, "
        "store it now (clients send it as 'Authorization: Bearer <key>').",
        markup=False,
        highlight=False,
    )


@app.command("list")
def list_keys(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List every key (prefix, scope, source, name, status); never a key itself."""
    cfg = load_config(config, as_json=as_json)
    records = _with_keys(cfg, lambda keys: keys.list(), as_json)
    if as_json:
        emit_json({"ok": True, "keys": [r.as_json() for r in records]})
        return
    table = Table(title="API keys")
    for column in ("prefix", "scope", "source", "name", "created (UTC)", "status"):
        table.add_column(column)
    for r in records:
        status = "active" if r.revoked_at is None else f"revoked {r.revoked_at:%Y-%m-%d %H:%M}"
        created = f"{r.created_at:%Y-%m-%d %H:%M}"
        table.add_row(r.prefix, r.scope.value, r.source.value, r.name or "", created, status)
    print_table(table)


@app.command("revoke")
def revoke(
    ref: Annotated[str, typer.Argument(metavar="PREFIX", help="The key's prefix (or id).")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a key for good; fails if no key or several keys have that prefix."""
    cfg = load_config(config, as_json=as_json)
    revocation = _with_keys(cfg, lambda keys: keys.revoke(ref), as_json)
    keys: list[dict[str, Any]] = [k.as_json() for k in revocation.keys]
    problem = {
        RevokeOutcome.UNKNOWN: f"no key has the prefix or id {ref!r}",
        RevokeOutcome.AMBIGUOUS: f"{len(keys)} keys have the prefix {ref!r}; revoke by id",
    }.get(revocation.outcome)
    if as_json:
        ok = problem is None
        emit_json(
            {"ok": ok, "outcome": revocation.outcome.value, "keys": keys}
            | ({} if ok else {"error": "KeyNotRevoked", "problems": [problem]})
        )
    elif problem is None:
        console.print(f"{ref}: {revocation.outcome.value.replace('_', ' ')}", markup=False)
    else:
        err_console.print("[bold red]KeyNotRevoked[/]")
        err_console.print(f"  - {problem}", markup=False, highlight=False)
        for key in keys:
            err_console.print(f"    {key['id']} ({key['name'] or 'unnamed'})", markup=False)
    if problem is not None:
        raise typer.Exit(1)
