"""Entry point of the ``foureyes`` command."""

from __future__ import annotations

import typer

app = typer.Typer(name="foureyes", no_args_is_help=True, help="foureyes: bounded model authority.")


def main() -> None:
    """Run the ``foureyes`` command line."""
    app()
