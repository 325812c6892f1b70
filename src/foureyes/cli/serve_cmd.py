"""``foureyes serve``: run the HTTP service, in one process or ``--workers N``.

With more than one worker, uvicorn's supervisor binds the port once and starts N worker
processes on it. The start-up checks (config, secrets, plugins, the scorer file) and the
store's migrations run once here, in the parent, before any worker starts; each worker
then builds the app from the same effective config (handed over as JSON in
``_FOUREYES_WORKER_CONFIG``), and its own store opening finds the schema at head (the
upgrade is under a lock anyway). A worker that fails to start stops the supervisor and
the command exits non-zero; SIGTERM or SIGINT is passed to every worker, each draining its
requests before it exits.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer
import uvicorn

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    discover_plugins,
    fail,
    run,
)
from foureyes.config import Config, load_config
from foureyes.core.errors import ConfigError, StoreError
from foureyes.core.roles import Role
from foureyes.plugins import BUILTIN_DISTRIBUTION
from foureyes.risk.screen_model import default_screen_model

if TYPE_CHECKING:
    from fastapi import FastAPI

_WORKER_CONFIG_ENV = "_FOUREYES_WORKER_CONFIG"
# uvicorn's exit code for a worker that failed before it served.
_STARTUP_FAILURE = 3
# How long the supervisor waits for a worker to answer its health ping before killing it
# as hung: a worker still importing foureyes on a busy machine takes longer than
# uvicorn's 5 s default, and would be killed and replaced in a loop.
_WORKER_HEALTHCHECK_S = 60


def serve(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Interface (default: server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: server.port).")] = None,
    workers: Annotated[
        str | None, typer.Option(help="Worker processes on the port (default: server.workers).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the support service; with no config: offline routes and a local SQLite store.

    Route kinds and rules registered by installed plugins are loaded first (a broken one
    stops the start, named); each third-party one is printed on start.
    """
    # --workers is validated as server.workers is (a whole number, at least 1, and not
    # with in-process rate limits), with the config's own error.
    overrides = {} if workers is None else {"FOUREYES_SERVER__WORKERS": workers}
    try:
        cfg = load_config(config, environ={**os.environ, **overrides})
        cfg.require_secrets(os.environ)
        cfg.require_review()
        plugins = discover_plugins(cfg)
        default_screen_model()  # L0's learned screen: a bad file stops the start here
        run(_preflight(cfg))
        served = _served_regions(cfg) if cfg.gate.region is None else ()
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
    bind_host = host or cfg.server.host
    bind_port = cfg.server.port if port is None else port
    in_use = ", ".join(sorted({cfg.roles.route_for(role) for role in Role}))
    count = cfg.server.workers
    cpus = usable_cpus()
    if outnumber(count, cpus):
        # Said, not refused: a container's CPU quota, or the set of CPUs later, may differ.
        note = {"warning": "workers_exceed_cpus", "workers": count, "cpus": cpus}
        typer.echo(
            json.dumps(note)
            if as_json
            else f"note: {count} workers on the {cpus} CPU(s) this process may use: each "
            "worker is one event loop, about a core's work at most, so the extra ones only "
            'take turns (docs/gateway.md, "Deployment")',
            err=True,
        )
    if cfg.gate.region is None:
        # Said, not refused: a client may name foureyes.region on each request.
        note = {"warning": "no_region", "served_regions": list(served)}
        typer.echo(json.dumps(note) if as_json else no_region_note(served), err=True)
    if cfg.evidence.configured and cfg.evidence.owner_service_url is None:
        # Said, not refused: the embedded default is one process and one trust domain.
        note = {"warning": "owner_in_process"}
        typer.echo(json.dumps(note) if as_json else OWNER_IN_PROCESS_NOTE, err=True)
    if not as_json:
        processes = f", {count} workers" if count > 1 else ""
        console.print(
            f"foureyes serving on http://{bind_host}:{bind_port} (routes: {in_use}{processes})"
        )
        for group, entries in plugins.items():
            for entry in entries:
                if entry["distribution"] != BUILTIN_DISTRIBUTION:
                    console.print(
                        f"plugin {group} {entry['name']} = {entry['value']} "
                        f"({entry['distribution']} {entry['version']})",
                        markup=False,
                        highlight=False,
                    )
    from foureyes.server._logging import logging_config

    bound = cfg.server.model_copy(update={"host": bind_host, "port": bind_port})
    effective = cfg.model_copy(update={"server": bound})
    options: dict[str, object] = {
        "log_config": logging_config(queue_lines=cfg.server.log_queue_lines),
        "access_log": False,
        "host": bind_host,
        "port": bind_port,
        "log_level": "info",
        "lifespan": "on",
        # uvicorn refuses a request once open connections, its own included, reach the
        # limit: one more than the configured number serves exactly that many (per worker).
        "limit_concurrency": cfg.server.max_connections + 1,
    }
    if count == 1:
        uvicorn.run(serving_app(effective), **options)  # type: ignore[arg-type]
        return
    _supervise(effective, options)


OWNER_IN_PROCESS_NOTE = (
    "note: the durable owner runs in this process (no evidence.owner_service_url): this "
    "process and its store are one trust domain, so the facts it files are checked, not "
    "independently guarded; run `foureyes owner serve` on PostgreSQL for that "
    '(docs/evidence.md, "Two processes, two roles")'
)


def no_region_note(served: Sequence[str]) -> str:
    """What ``serve`` says at start-up when no ``gate.region`` is configured.

    Args:
        served: the regions the deployment's crisis-resource registry has lines for
            (:meth:`~foureyes.risk.resources.ResourceRegistry.served_regions`), the values
            of ``gate.region`` or ``foureyes.region`` for which a crisis reply shows a number.
    """
    regions = ", ".join(served) if served else "none"
    return (
        "note: gate.region is not set: a crisis reply to a request that names no "
        "foureyes.region shows no phone number, only the advice to call the local emergency "
        'number and the international directory (set [gate] region, e.g. region = "CN"; '
        f"the crisis-resource registry has lines for {regions})"
    )


def _served_regions(cfg: Config) -> tuple[str, ...]:
    """The regions the registry ``[risk] resources_file`` configures serves.

    Raises:
        ConfigError: the file is missing or malformed.
    """
    from foureyes.risk.resources import configured_registry

    return configured_registry(cfg.risk).served_regions()


def usable_cpus() -> int | None:
    """How many CPUs this process may run on (its affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def outnumber(workers: int, cpus: int | None) -> bool:
    """Whether ``workers`` processes would outnumber the ``cpus`` the process may use.

    A worker runs one event loop, so it does at most about one core's work; workers beyond
    the CPUs add turns, not throughput (benchmarks/README.md, "One worker against two on
    PostgreSQL"). ``False`` when the count of CPUs is unknown.
    """
    return cpus is not None and workers > cpus


def _supervise(effective: Config, options: dict[str, object]) -> None:
    """Run ``server.workers`` processes of :func:`worker_app` on one socket until stopped.

    Raises:
        typer.Exit: a worker failed to start (code 3, as uvicorn's own single process).
    """
    from uvicorn.supervisors import Multiprocess

    os.environ[_WORKER_CONFIG_ENV] = effective.model_dump_json()
    config = uvicorn.Config(
        f"{__name__}:worker_app",
        factory=True,
        workers=effective.server.workers,
        timeout_worker_healthcheck=_WORKER_HEALTHCHECK_S,
        **options,  # type: ignore[arg-type]
    )
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    supervisor.run()
    if any(process.exitcode == _STARTUP_FAILURE for process in supervisor.processes):
        raise typer.Exit(_STARTUP_FAILURE)


def worker_app() -> FastAPI:
    """The app of one ``serve`` worker process, from the config its parent checked."""
    return serving_app(Config.model_validate_json(os.environ[_WORKER_CONFIG_ENV]))


def serving_app(effective: Config) -> FastAPI:
    """The app a ``serve`` process runs: it owns the process (see ``create_app``)."""
    # Imported here so that other commands do not pay for FastAPI's import.
    from foureyes.server.app import create_app

    return create_app(effective, dict(os.environ), owns_process=True)


async def _preflight(cfg: Config) -> None:
    """Open the store, build the routes, read the kinds and texts: start-up errors, one line."""
    from foureyes.evidence import ConfiguredEvidence
    from foureyes.gate.fallback import configured_texts
    from foureyes.llm.routes import Routes
    from foureyes.server.auth import env_api_keys
    from foureyes.store import Store

    env_api_keys(cfg.server, os.environ)
    configured_texts(cfg)  # the team's fallback wording, each text checked by the rules
    evidence = ConfiguredEvidence.from_config(cfg.evidence, environ=os.environ)
    if evidence is not None:
        await evidence.aclose()
    routes = Routes.build(cfg, os.environ)
    await routes.aclose()
    store = await Store.open(cfg.store, cfg.privacy, os.environ)
    try:
        problem = await store.shared_by_processes(cfg.server.workers)
    finally:
        await store.close()
    if problem is not None:
        raise ConfigError([f"server.workers = {cfg.server.workers}: {problem}"])
