"""Entry point of the ``foureyes`` command: one import per command group."""

from __future__ import annotations

import typer

from foureyes.cli import (
    assess_cmd,
    calibrate_cmd,
    chat_cmd,
    config_cmd,
    eval_cmd,
    facts_cmd,
    keys_cmd,
    review_cmd,
    risk_cmd,
    serve_cmd,
    simulate_cmd,
    store_cmd,
    trace_cmd,
)

app = typer.Typer(
    name="foureyes",
    no_args_is_help=True,
    add_completion=False,
    help="foureyes: a model proposes; deterministic code decides.",
)
app.add_typer(config_cmd.app, name="config")
app.command("serve")(serve_cmd.serve)
app.command("chat")(chat_cmd.chat)
app.command("simulate")(simulate_cmd.simulate)
app.command("assess")(assess_cmd.assess)
risk_cmd.app.command("calibrate")(calibrate_cmd.calibrate)
app.add_typer(risk_cmd.app, name="risk")
app.command("review")(review_cmd.review)
app.add_typer(facts_cmd.app, name="facts")
app.add_typer(keys_cmd.app, name="keys")
app.add_typer(trace_cmd.app, name="trace")
app.add_typer(store_cmd.app, name="store")
app.add_typer(eval_cmd.app, name="eval")


def main() -> None:
    """Run the ``foureyes`` command line."""
    app()
