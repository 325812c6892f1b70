"""``foureyes simulate``: run the OpenAI-compatible simulator on a scenario file."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated

import typer

from foureyes.cli._common import JsonOption, console, fail, run
from foureyes.core.errors import ConfigError
from foureyes.llm.simulate import Simulator, listen, load_scenario, serve

__all__ = ["simulate"]


def simulate(
    scenario: Annotated[
        Path,
        typer.Option(
            "--scenario", help="Scenario file (TOML or JSON; see docs/simulate.md).", dir_okay=False
        ),
    ],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to listen on; 0 picks a free one.")
    ] = 8100,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    log: Annotated[
        Path | None,
        typer.Option(help="Append every request received to this JSONL file.", dir_okay=False),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Serve scripted OpenAI-compatible replies, with faults, until interrupted.

    Once listening it prints the URL (with --json, one line: {"url", "base_url", "port"}).
    A scenario that is not TOML/JSON, has unknown keys, a bad regex, an unknown fault or
    a scripted verdict citing a rule outside the catalogue exits with status 1 before
    anything listens.
    """
    try:
        simulator = Simulator(load_scenario(scenario), log_path=log)
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    try:
        sock = listen(host, port)
    except ConfigError as exc:
        simulator.close()
        fail(exc, as_json=as_json)
    bound_port: int = sock.getsockname()[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{bound_port}"
    if as_json:
        ready = {"url": url, "base_url": f"{url}/v1", "port": bound_port}
        typer.echo(json.dumps(ready))
    else:
        models = ", ".join(sorted(simulator.scenario.models))
        console.print(
            f"foureyes simulate listening on {url} (base_url {url}/v1; models: {models})",
            markup=False,
            highlight=False,
            soft_wrap=True,  # one line, however narrow the terminal: scripts read it
        )
        console.file.flush()
    # uvicorn re-raises the SIGINT it shut down on; for this command that is the normal end.
    with contextlib.suppress(KeyboardInterrupt):
        run(serve(simulator, sock))
