"""Entry point of the ``foureyes`` command: each command's module imported when it runs.

A command module imports what its command needs (the server, the store, the evals), so
importing them all costs seconds of CPU for every invocation; :class:`_LazyGroup` imports
only the one named on the command line. ``foureyes --help`` imports none: it lists each
command with its line of :data:`_HELP` (a test holds each to the first line of its
module's own help). benchmarks/cli_startup.py measures what starting costs.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import typer
from typer import _click as click  # typer's own click (0.29 vendors it): its Command types
from typer._click.utils import PacifyFlushWrapper
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo

Loader = Callable[[], click.Command]


def _command(module: str, function: str) -> Loader:
    """A loader of ``module.function`` as a single command, as ``app.command()`` mounts it."""

    def load() -> click.Command:
        callback = getattr(importlib.import_module(module), function)
        return typer.main.get_command_from_info(
            CommandInfo(callback=callback),
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
        )

    return load


def _group(module: str) -> Loader:
    """A loader of the command group ``module.app``, as ``app.add_typer`` mounts it."""
    return lambda: typer.main.get_group(importlib.import_module(module).app)


def _risk() -> click.Command:
    """The ``risk`` group with ``calibrate`` mounted on it (it lives in its own module)."""
    from foureyes.cli import calibrate_cmd, risk_cmd

    if not any(info.name == "calibrate" for info in risk_cmd.app.registered_commands):
        risk_cmd.app.command("calibrate")(calibrate_cmd.calibrate)
    return typer.main.get_group(risk_cmd.app)


_PKG = "foureyes.cli."
# Name -> loader, in the order `foureyes --help` lists them.
_COMMANDS: dict[str, Loader] = {
    "serve": _command(_PKG + "serve_cmd", "serve"),
    "chat": _command(_PKG + "chat_cmd", "chat"),
    "simulate": _command(_PKG + "simulate_cmd", "simulate"),
    "assess": _command(_PKG + "assess_cmd", "assess"),
    "review": _command(_PKG + "review_cmd", "review"),
    "config": _group(_PKG + "config_cmd"),
    "risk": _risk,
    "facts": _group(_PKG + "facts_cmd"),
    "owner": _group(_PKG + "owner_cmd"),
    "keys": _group(_PKG + "keys_cmd"),
    "checks": _group(_PKG + "checks_cmd"),
    "trace": _group(_PKG + "trace_cmd"),
    "store": _group(_PKG + "store_cmd"),
    "eval": _group(_PKG + "eval_cmd"),
}
# Name -> the first line of the command's own help, which `foureyes --help` shows without
# importing the command (tests/cli/test_main.py holds them equal). A command missing here
# is imported to be listed.
_HELP: dict[str, str] = {
    "serve": "Run the support service; with no config: offline routes and a local SQLite store.",
    "chat": "Talk to the support pipeline: each line of stdin is a message.",
    "simulate": "Serve scripted OpenAI-compatible replies, with faults, until interrupted.",
    "assess": "Triage TEXT (or every line of --file): L0 keywords, then L1/L2 assessments.",
    "review": "Review SESSION_FILE as a reviewer that does not see the masked reasoning.",
    "config": "Inspect and validate configuration.",
    "risk": "Crisis triage: evidence for the L0 lexicon, and training of the learned screen.",
    "facts": "Evidence-bound durable facts.",
    "owner": "Run the durable owner service (the only writer of observations).",
    "keys": "Create, list and revoke API keys.",
    "checks": "The catalogue of input checks and output rules.",
    "trace": "Read recorded runs.",
    "store": "Maintain the store.",
    "eval": "Paired-arm evaluation: suites, runs, reports.",
}


class _LazyGroup(TyperGroup):
    """The top-level group: builds a command from its module on first use.

    While it writes its own help it lists a command not built yet by its :data:`_HELP`
    line alone, so the listing imports no command module.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loaded: dict[str, click.Command] = {}
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*_COMMANDS, *(n for n in super().list_commands(ctx) if n not in _COMMANDS)]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's plain listing rather than typer's boxes: typer's rich help loads
        # rich's markdown, syntax and traceback modules, 0.07-0.09 s of CPU, more than
        # the rest of `foureyes --help` (benchmarks/README.md, "Starting the command
        # line"). The commands' own help stays typer's.
        self._listing = True
        mode, self.rich_markup_mode = self.rich_markup_mode, None
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
            self.rich_markup_mode = mode

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            # typer shows no error for this (its rich help has printed itself), so the
            # plain help is printed here, with the status typer gives (2).
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(2)
        return super().parse_args(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        loader = _COMMANDS.get(cmd_name)
        if loader is None:
            return super().get_command(ctx, cmd_name)
        if cmd_name not in self._loaded and self._listing and cmd_name in _HELP:
            # Only listed, never run: a stand-in that carries the help line.
            return TyperCommand(cmd_name, help=_HELP[cmd_name], short_help=_HELP[cmd_name])
        if cmd_name not in self._loaded:
            command = loader()
            command.name = cmd_name
            self._loaded[cmd_name] = command
        return self._loaded[cmd_name]


app = typer.Typer(
    name="foureyes",
    cls=_LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    help="foureyes: a model proposes; deterministic code decides.",
)


@app.callback()
def _root() -> None:
    # A group needs a callback or a registered command to be built; the commands are lazy.
    pass


def main() -> None:
    """Run the ``foureyes`` command line.

    A reader that closes the pipe early (``foureyes review ... | head``) is not an error:
    the command ends quietly with status 0.
    """
    try:
        app()
    except SystemExit as exc:
        # typer ends a closed pipe with status 1, its streams wrapped so the exit's flush
        # is quiet: that wrapping is how the pipe's end is told from a command's failure.
        if exc.code == 1 and isinstance(sys.stdout, PacifyFlushWrapper):
            raise SystemExit(0) from None
        raise
    except BrokenPipeError:  # a write after the command, outside typer
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0) from None
