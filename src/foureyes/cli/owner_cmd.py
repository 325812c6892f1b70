"""``foureyes owner serve``: the durable owner as a process of its own.

It is the only process that should hold the owner role's database credential
(``[evidence] owner_url``; unset: ``store.url``). It reads the kinds and the catalog
source of its own ``[evidence]`` section, takes commits over
:mod:`foureyes.server.owner_app` behind the token of ``[evidence] owner_token_env``, and
writes what it rendered itself. The gateway's config names it by ``owner_service_url``
(docs/evidence.md, "Two processes, two roles").
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from foureyes.cli._common import ConfigOption, JsonOption, console, fail, load
from foureyes.core.errors import ConfigError

app = typer.Typer(
    no_args_is_help=True, help="Run the durable owner service (the only writer of observations)."
)

DEFAULT_PORT = 8711


@app.command("serve")
def serve(
    config: ConfigOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    as_json: JsonOption = False,
) -> None:
    """Serve commits for the gateway: rebuild, judge, render and write, from our own source.

    Exits 1 when the config has no ``[evidence]`` catalog source and kinds, names an
    ``owner_service_url`` (that is the gateway's side), or the token variable is unset.
    Start the gateway (or ``foureyes store init-roles``) first: the owner's role may not
    migrate the store.
    """
    import uvicorn

    from foureyes.evidence import ConfiguredEvidence, DurableOwner
    from foureyes.evidence.sources import owner_token
    from foureyes.server._logging import logging_config
    from foureyes.server.owner_app import owner_app
    from foureyes.store._database import Database
    from foureyes.store.observations import SqlObservationLog

    cfg = load(config, as_json=as_json)
    evidence_cfg = cfg.evidence
    try:
        if not evidence_cfg.configured:
            raise ConfigError(["evidence: the owner service needs kinds_file and a catalog source"])
        if evidence_cfg.owner_service_url is not None:
            raise ConfigError(
                ["evidence.owner_service_url is the gateway's setting; the owner writes itself"]
            )
        token = owner_token(evidence_cfg, os.environ)
        evidence = ConfiguredEvidence.from_config(evidence_cfg, timeout_s=cfg.store.timeout_s)
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    assert evidence is not None  # configured, checked above
    db = evidence.owner_db or Database.create(cfg.store.url, timeout_s=cfg.store.timeout_s)
    owner = DurableOwner(evidence.source, evidence.kinds, SqlObservationLog(db))
    if not as_json:
        console.print(
            f"foureyes owner service on http://{host}:{port} (kinds {evidence.kinds.sha256[:12]})"
        )
    try:
        uvicorn.run(
            owner_app(owner, token),
            host=host,
            port=port,
            log_config=logging_config(queue_lines=cfg.server.log_queue_lines),
            access_log=False,
            lifespan="off",
        )
    finally:
        # uvicorn has ended its loop; a fresh one releases the connections.
        import asyncio

        async def close() -> None:
            await evidence.aclose()
            if evidence.owner_db is None:
                await db.dispose()

        asyncio.run(close())
