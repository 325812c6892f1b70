"""Entry point of the ``foureyes`` command: one import per command group."""

from __future__ import annotations

import typer

from foureyes.cli import config_cmd, serve_cmd, simulate_cmd

app = typer.Typer(
    name="foureyes",
    no_args_is_help=True,
    add_completion=False,
    help="foureyes: a model proposes; deterministic code decides.",
)
app.add_typer(config_cmd.app, name="config")
app.command("serve")(serve_cmd.serve)
app.command("simulate")(simulate_cmd.simulate)


def main() -> None:
    """Run the ``foureyes`` command line."""
    app()
