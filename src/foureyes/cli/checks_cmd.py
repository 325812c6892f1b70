"""``foureyes checks list``: the catalogue of input checks and output rules.

Every input check registered in the ``foureyes.checks`` entry-point group (the built-ins
first), the team's ``[input.patterns]``, and every output rule of ``foureyes.rules``, one
line each: stage, id, kind (deterministic code or a model), languages, categories, what
it detects and who registers it. ``--json`` prints the same as a list of objects.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from foureyes.cli._common import ConfigOption, JsonOption, emit_json, fail
from foureyes.cli._common import load as load_config
from foureyes.core.errors import ConfigError

__all__ = ["app", "list_checks"]

app = typer.Typer(no_args_is_help=True, help="The catalogue of input checks and output rules.")

_HEADER = (
    f"{'stage':<6}  {'id':<22}  {'kind':<13}  {'languages':<18}  {'categories':<26}  "
    "detects  (registered by)"
)


@app.command("list")
def list_checks(
    stage: Annotated[
        str | None, typer.Option(help="Only this stage: input or output.", metavar="STAGE")
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List every input check and output rule: id, kind, languages, what it detects."""
    if stage not in (None, "input", "output"):
        raise typer.BadParameter(f"--stage is input or output, not {stage!r}")
    cfg = load_config(config, as_json=as_json)
    from foureyes.inputs import catalogue

    try:
        entries = [e for e in catalogue(cfg.input) if stage is None or e.stage == stage]
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json([asdict(e) for e in entries])
        return
    typer.echo(_HEADER)
    for entry in entries:
        typer.echo(entry.line())
