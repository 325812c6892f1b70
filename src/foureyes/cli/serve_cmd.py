"""``foureyes serve``: run the HTTP service."""

from __future__ import annotations

import os
from typing import Annotated

import typer
import uvicorn

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    discover_plugins,
    fail,
    load,
    run,
)
from foureyes.config import Config
from foureyes.core.errors import ConfigError, StoreError
from foureyes.core.roles import Role
from foureyes.plugins import BUILTIN_DISTRIBUTION
from foureyes.risk.screen_model import default_screen_model


def serve(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Interface (default: server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: server.port).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the support service; with no config: offline routes and a local SQLite store.

    Route kinds and rules registered by installed plugins are loaded first (a broken one
    stops the start, named); each third-party one is printed on start.
    """
    cfg = load(config, as_json=as_json)
    try:
        cfg.require_secrets(os.environ)
        cfg.require_review()
        plugins = discover_plugins(cfg)
        default_screen_model()  # L0's learned screen: a bad file stops the start here
        run(_preflight(cfg))
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
    # Imported here so that other commands do not pay for FastAPI's import.
    from foureyes.server.app import create_app

    bind_host = host or cfg.server.host
    bind_port = cfg.server.port if port is None else port
    in_use = ", ".join(sorted({cfg.roles.route_for(role) for role in Role}))
    if not as_json:
        console.print(f"foureyes serving on http://{bind_host}:{bind_port} (routes: {in_use})")
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
    uvicorn.run(
        create_app(cfg.model_copy(update={"server": bound}), dict(os.environ)),
        log_config=logging_config(),
        access_log=False,
        host=bind_host,
        port=bind_port,
        log_level="info",
        lifespan="on",
        # uvicorn refuses a request once open connections, its own included, reach the
        # limit: one more than the configured number serves exactly that many.
        limit_concurrency=cfg.server.max_connections + 1,
    )


async def _preflight(cfg: Config) -> None:
    """Open the store, build the routes and read the kinds once: start-up errors, one line."""
    from foureyes.evidence import ConfiguredEvidence
    from foureyes.llm.routes import Routes
    from foureyes.server.auth import env_api_keys
    from foureyes.store import Store

    env_api_keys(cfg.server, os.environ)
    evidence = ConfiguredEvidence.from_config(cfg.evidence)
    if evidence is not None:
        await evidence.aclose()
    routes = Routes.build(cfg, os.environ)
    await routes.aclose()
    store = await Store.open(cfg.store, cfg.privacy, os.environ)
    await store.close()
