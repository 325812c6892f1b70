"""Entry point of the ``foureyes`` command: each command's module imported when it runs.

A command module imports what its command needs (the server, the store, the evals), so
importing them all costs seconds of CPU for every invocation; :class:`_LazyGroup` imports
only the one named on the command line (``--help`` lists all, so it imports all).
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
from typer.core import TyperGroup
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
    "trace": _group(_PKG + "trace_cmd"),
    "store": _group(_PKG + "store_cmd"),
    "eval": _group(_PKG + "eval_cmd"),
}


class _LazyGroup(TyperGroup):
    """The top-level group: builds a command from its module on first use."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loaded: dict[str, click.Command] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*_COMMANDS, *(n for n in super().list_commands(ctx) if n not in _COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        loader = _COMMANDS.get(cmd_name)
        if loader is None:
            return super().get_command(ctx, cmd_name)
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
