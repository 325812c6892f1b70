"""``foureyes config ...``: inspect and validate configuration."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    discover_plugins,
    emit_json,
    fail,
    load,
    print_table,
)
from foureyes.config import CONFIG_ENV, Config
from foureyes.core.budget import utc_day
from foureyes.core.errors import ConfigError
from foureyes.core.roles import Role
from foureyes.risk.resources import configured_registry, secondary_entries, stale_entries
from foureyes.risk.screen_model import default_screen_model

app = typer.Typer(no_args_is_help=True, help="Inspect and validate configuration.")


VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Print everything: the roles, the plugins, the whole config and every warning.",
    ),
]


@app.command("check")
def check(
    config: ConfigOption = None, verbose: VerboseOption = False, as_json: JsonOption = False
) -> None:
    """Validate the config; sum it up, or print it as it takes effect (secrets masked).

    A valid config gets a short summary: that it is valid, which file, how each route
    serves the roles, and the warnings counted by kind with one example each;
    ``--verbose`` prints the roles, the plugins, the whole config and every warning, and
    ``--json`` all of it as data. Problems (exit 1) are always printed in full.

    Lists the route kinds and rules registered by entry point with the distribution of each
    (``plugins`` in ``--json``); a plugin that cannot be loaded, is of the wrong type or
    reuses a registered name fails it, naming the entry point. Fails (exit 1) on unknown
    keys, values out of range, roles naming missing routes, unknown route kinds, API-key
    variables that are not set, an ``[evidence]`` kinds file that is missing or malformed
    (a template without a slot), or a model Counselor whose replies no second model reviews
    (the Supervisor on the offline route) unless ``[gate] supervisor_unreviewed`` says so;
    then the output lists it under ``unreviewed``. A ``[risk] resources_file`` that is
    missing or malformed fails it too, and so does a ``[gate] texts_file`` that is
    missing, not TOML, has an unknown key, a missing locale or an empty text, or holds a
    text a rule checked in code refuses (each problem names its entry and the rule);
    registry entries whose check is older than their review period are listed under
    ``stale_resources``, and entries checked only against a secondary source (not the
    operator's, a government's or a recognised directory's page) under
    ``secondary_resources`` (warnings: the config is still OK). Warns (exit 0,
    ``crisis_shared_routes`` in ``--json``) about each model route that
    ``risk_l1``/``risk_l2`` share with other roles. A packaged learned risk screen that is
    missing, corrupt or of another feature version fails it (``serve`` would not start).
    A ``[privacy] unknowns_key_env`` that is not set or holds no 32-byte key fails it;
    ``privacy_notes`` says where open unknowns' sealed words get their key (a key kept in
    the store protects only a copy of the unknowns table, not the store as a whole).
    Key values are never printed: only the variables' names and whether they are set.
    """
    cfg = load(config, as_json=as_json)
    try:
        plugins = discover_plugins(cfg)
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    kinds = [kind["name"] for kind in plugins["route_kinds"]]
    problems = [
        f"routes.{name}.kind {route.kind!r} is unknown (known: {', '.join(kinds)})"
        for name, route in sorted(cfg.routes.items())
        if route.kind not in kinds
    ]
    problems += [f"environment variable {n} is not set" for n in cfg.missing_secrets(os.environ)]
    problems += cfg.review_problems()
    problems += _evidence_problems(cfg)
    registry_problems, stale, secondary = _resource_report(cfg)
    problems += registry_problems
    problems += _texts_problems(cfg) if not registry_problems else []
    problems += _screen_problems()
    problems += _unknowns_key_problems(cfg)
    if problems:
        fail(ConfigError(problems), as_json=as_json)
    secrets = sorted(
        {r.api_key_env for r in cfg.routes.values() if r.api_key_env}
        | ({cfg.privacy.hmac_key_env} if cfg.privacy.hmac_key_env else set())
        | ({cfg.privacy.unknowns_key_env} if cfg.privacy.unknowns_key_env else set())
    )
    secret_status = {name: ("set" if os.environ.get(name) else "missing") for name in secrets}
    # Past the problems, an unreviewed Counselor is one the config accepted explicitly.
    unreviewed = [reason] if (reason := cfg.unreviewed_replies()) else []
    shared = _crisis_shared(cfg)
    privacy_notes = _privacy_notes(cfg)
    owner = _facts_owner(cfg)
    if as_json:
        emit_json(
            {
                "ok": True,
                "config": cfg.masked(),
                "secrets": secret_status,
                "unreviewed": unreviewed,
                "crisis_shared_routes": shared,
                "privacy_notes": privacy_notes,
                "facts_independence": owner,
                "stale_resources": stale,
                "secondary_resources": secondary,
                "plugins": plugins,
            }
        )
        return
    warnings: list[tuple[str, list[str]]] = [
        ("accepted by gate.supervisor_unreviewed", unreviewed),
        ("crisis roles sharing a model route", [str(e["warning"]) for e in shared]),
        ("privacy note", privacy_notes),
        (
            "facts owner not independent",
            [f"{owner['reason']}: {owner['detail']}"]
            if owner is not None and not owner["independent"]
            else [],
        ),
        ("crisis resource past its review period", stale),
        ("crisis resource checked only against a secondary source", secondary),
    ]
    if not verbose:
        _print_summary(cfg, config, secret_status, warnings)
        return
    table = Table(title="roles")
    table.add_column("role")
    table.add_column("route")
    table.add_column("kind")
    table.add_column("model")
    for role in Role:
        name, route = cfg.route_for(role)
        table.add_row(role.value, name, route.kind, route.model)
    print_table(table)
    listed = Table(title="plugins (entry points)")
    for column in ("group", "name", "object", "distribution"):
        listed.add_column(column)
    for group, entries in plugins.items():
        for listed_entry in entries:
            dist = f"{listed_entry['distribution']} {listed_entry['version']}"
            listed.add_row(group, listed_entry["name"], listed_entry["value"], dist)
    print_table(listed)
    console.print_json(data={k: v for k, v in cfg.masked().items()})
    for name, status in secret_status.items():
        console.print(f"secret variable {name}: {status}")
    for problem in unreviewed:
        console.print(f"[yellow]accepted by gate.supervisor_unreviewed:[/] {problem}")
    for entry in shared:
        console.print(f"[yellow]warning:[/] {entry['warning']}")
    for note in privacy_notes:
        console.print(f"[yellow]privacy:[/] {note}", highlight=False)
    if owner is not None and not owner["independent"]:
        console.print(
            f"[yellow]facts: the durable owner is not independent ({owner['reason']}):[/] "
            f"{owner['detail']}",
            highlight=False,
        )
    for line in stale:
        console.print(f"[yellow]crisis resource past its review period:[/] {line}")
    for line in secondary:
        console.print(f"[yellow]crisis resource checked only against a secondary source:[/] {line}")
    console.print("[green]config OK[/]")


def _print_summary(
    cfg: Config,
    path: Path | None,
    secrets: dict[str, str],
    warnings: list[tuple[str, list[str]]],
) -> None:
    """The few lines a valid config gets by default (``--verbose`` prints everything)."""
    chosen = path if path is not None else os.environ.get(CONFIG_ENV) or None
    where = (
        f"config file {chosen}"
        if chosen is not None
        else f"built-in offline defaults (no --config, {CONFIG_ENV} unset)"
    )

    def out(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    console.print(f"[green]config OK[/]: {where}", highlight=False, soft_wrap=True)
    served: dict[str, list[str]] = {}
    for role in Role:
        served.setdefault(cfg.route_for(role)[0], []).append(role.value)
    for name, roles in served.items():
        route = cfg.routes[name]
        out(f"route {name} ({route.kind}, {route.model}): {', '.join(roles)}")
    if secrets:
        out("secret variables: " + ", ".join(f"{k} {v}" for k, v in secrets.items()))
    found = [(kind, lines) for kind, lines in warnings if lines]
    if found:
        out(f"warnings ({sum(len(lines) for _, lines in found)}):")
    for kind, lines in found:
        out(
            f"  {kind}: {lines[0]}"
            if len(lines) == 1
            else f"  {kind} ({len(lines)}), e.g. {lines[0]}"
        )
    out("run with --verbose for everything (roles, plugins, the whole config, every warning)")


def _resource_report(cfg: Config) -> tuple[list[str], list[str], list[str]]:
    """Problems, stale entries and secondary-sourced entries of the registry ``serve`` loads."""
    try:
        registry = configured_registry(cfg.risk)
    except ConfigError as exc:
        return list(exc.problems), [], []
    stale = [
        f"{e.id} ({e.region}): checked {e.checked.isoformat()}, review every "
        f"{e.review_days} days, source {e.source}"
        for e in stale_entries(registry, today=utc_day())
    ]
    secondary = [
        f"{e.id} ({e.region}): source {e.source}, checked {e.checked.isoformat()}"
        for e in secondary_entries(registry)
    ]
    return [], stale, secondary


def _texts_problems(cfg: Config) -> list[str]:
    """Problems of the ``[gate] texts_file`` ``serve`` loads (its texts checked by the rules)."""
    from foureyes.gate.fallback import configured_texts

    try:
        configured_texts(cfg)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def _evidence_problems(cfg: Config) -> list[str]:
    """What is wrong with the ``[evidence]`` kinds file, as ``serve`` would find it."""
    if cfg.evidence.kinds_file is None:
        return []
    # Imported here so that checking a config without facts does not load the evidence code.
    from foureyes.evidence import KindRegistry

    try:
        KindRegistry.from_file(cfg.evidence.kinds_file)
    except ConfigError as exc:
        return list(exc.problems)
    return []


_OWNER_DETAIL = {
    "sqlite_one_trust_domain": "SQLite is one file: any connection can drop its checks, "
    "which are a consistency check here, not a boundary; use PostgreSQL and "
    "`foureyes owner serve`",
    "owner_in_process": "the owner writes from the serving process (no "
    "evidence.owner_service_url): whoever controls it holds the owner's credential",
    "separate_owner_service": "the store role's privileges are checked when serve starts",
}


def _facts_owner(cfg: Config) -> dict[str, object] | None:
    """Whether ``[evidence]``'s owner would be independent, as far as the config says."""
    if not cfg.evidence.configured:
        return None
    from sqlalchemy.engine import make_url

    from foureyes.store.roles import judge_independence

    dialect = make_url(cfg.store.url).get_backend_name()  # store.url is checked already
    found = judge_independence(dialect, owner_service=cfg.evidence.owner_service_url is not None)
    return {
        "independent": found.independent,
        "reason": found.reason,
        "detail": _OWNER_DETAIL[found.reason],
    }


def _crisis_shared(cfg: Config) -> list[dict[str, object]]:
    """Each route the crisis roles share with other roles, with a warning about it."""
    share = cfg.risk.reserved_share
    entries: list[dict[str, object]] = []
    for name in cfg.crisis_shared_routes():
        if cfg.routes[name].kind == "offline":
            continue  # the built-in engine calls no endpoint and costs nothing
        roles = [r.value for r in Role if cfg.roles.route_for(r) == name]
        kept = (
            f"the crisis roles keep {share:.0%} of its daily limits ([risk] reserved_share)"
            if share > 0
            else "nothing is kept for the crisis roles ([risk] reserved_share = 0), so other "
            "traffic can use up the budget and turn every assessment unknown"
        )
        entries.append(
            {
                "route": name,
                "roles": roles,
                "reserved_share": share,
                "warning": f"route {name!r} serves {', '.join(roles)}: the crisis roles share "
                f"it with the others; {kept}. Give risk_l1 and risk_l2 a route of their own "
                "for a budget independent of chat traffic.",
            }
        )
    return entries


def _screen_problems() -> list[str]:
    """Why the learned risk screen L0 loads at start-up would not load, if it would not."""
    try:
        default_screen_model()
    except ConfigError as exc:
        return list(exc.problems)
    return []


def _unknowns_key_problems(cfg: Config) -> list[str]:
    """Why ``[privacy] unknowns_key_env`` gives no key, as ``Store.open`` would find it."""
    try:
        cfg.privacy.unknowns_key(os.environ)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def _privacy_notes(cfg: Config) -> list[str]:
    """What protects open unknowns' sealed words at rest, and for how long they are kept."""
    privacy = cfg.privacy
    kept = (
        f"open unknowns keep their words for the next prompts, sealed (AES-256-GCM), until "
        f"resolved or for {privacy.unknown_retention_days} days after last raised "
        f"([privacy] unknown_retention_days), whatever store_raw_text says"
    )
    if privacy.unknowns_key_env is not None:
        return [f"{kept}; their key is in {privacy.unknowns_key_env}"]
    return [
        f"{kept}; their key is kept in the store itself, which protects only a copy of the "
        "unknowns table, not a copy of the store as a whole: set [privacy] unknowns_key_env "
        "for at-rest protection"
    ]
