"""Shared pieces of the CLI: the one sync edge, common options, error rendering."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from foureyes.config import Config, load_config
from foureyes.core.errors import ConfigError, FoureyesError

if TYPE_CHECKING:
    from rich.table import Table

T = TypeVar("T")

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config file (default: $FOUREYES_CONFIG, else built-in offline defaults).",
        dir_okay=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


class _Console(Console):
    """A console for which a reader that stopped reading is not an error."""

    def on_broken_pipe(self) -> None:
        """End quietly with status 0 (``foureyes ... | head``), as rich's would with 1."""
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0)


console = _Console()
err_console = _Console(stderr=True)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion: the CLI's only bridge from sync to async."""
    import asyncio  # not for a command that runs none (`trace list` on SQLite at head)

    return asyncio.run(coro)


def emit_json(value: Any) -> None:
    """Print ``value`` as one JSON document on stdout."""
    typer.echo(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True))


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` as plain lines, one per row, columns aligned by spaces, nothing cut.

    No value is wrapped or shortened at any width (an id or a digest must stay whole), so
    a file or a pipe gets one line per row; a value's own line breaks become spaces.
    """
    cells = [[" ".join(str(cell).split("\n")) for cell in row] for row in rows]
    widths: list[int] = []
    for row in cells:
        for index, cell in enumerate(row):
            if index == len(widths):
                widths.append(0)
            widths[index] = max(widths[index], len(cell))
    for row in cells:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        console.print(line.rstrip(), markup=False, highlight=False, emoji=False, soft_wrap=True)


def print_table(table: Table) -> None:
    """Print ``table``: drawn by rich on a terminal, else as plain rows (:func:`print_rows`).

    Off a terminal (a file, a pipe) rich would fit the table to 80 columns, wrapping its
    values down to one character a line; there the title (if any) comes first, then the
    header and one line per row with full values.
    """
    if console.is_terminal:
        console.print(table)
        return
    columns = table.columns
    rows = [[_plain(column.header) for column in columns]] if table.show_header else []
    by_column = [[_plain(cell) for cell in column.cells] for column in columns]
    rows += [list(row) for row in zip(*by_column, strict=True)]
    if table.title:
        console.print(_plain(table.title), markup=False, highlight=False, soft_wrap=True)
    print_rows(rows)


def _plain(cell: object) -> str:
    """A table cell's text, its markup (``[green]pass[/]``) rendered and styles dropped."""
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return console.render_str(cell).plain
    return str(cell)


def fail(error: FoureyesError, *, as_json: bool) -> NoReturn:
    """Report ``error`` (on stdout as JSON, or on stderr) and exit with status 1."""
    problems = list(error.problems) if isinstance(error, ConfigError) else [str(error)]
    if as_json:
        emit_json({"ok": False, "error": type(error).__name__, "problems": problems})
    else:
        err_console.print(f"[bold red]{type(error).__name__}[/]")
        for problem in problems:
            err_console.print(f"  - {problem}", markup=False, highlight=False)
    raise typer.Exit(1)


def load(path: Path | None, *, as_json: bool) -> Config:
    """Load the effective config or exit with its problems listed."""
    try:
        return load_config(path, environ=os.environ)
    except ConfigError as exc:
        fail(exc, as_json=as_json)


def discover_plugins(config: Config) -> dict[str, list[dict[str, str]]]:
    """The route kinds, rules and input checks registered by entry point (``config check``).

    ``foureyes checks list`` shows the whole catalogue. Loads the three groups and builds
    the rule catalogue and the input checks ``config`` makes, so that a broken plugin, an
    id clash, an extra rule or a team pattern reusing a registered id fails here, at
    start-up.

    Raises:
        ConfigError: naming each plugin that cannot be used (see :mod:`foureyes.plugins`).
    """
    # Imported here so that commands that use no route or rule do not load the gate.
    from foureyes.gate.rules import RuleCatalogue, registered_rules
    from foureyes.inputs import InputChecks, registered_checks
    from foureyes.llm.routes import route_kinds

    problems: list[str] = []
    listing: dict[str, list[dict[str, str]]] = {}
    groups = (
        ("route_kinds", route_kinds),
        ("rules", registered_rules),
        ("checks", registered_checks),
    )
    for group, discover in groups:
        try:
            listing[group] = [plugin.as_json() for plugin in discover()]
        except ConfigError as exc:
            problems.extend(exc.problems)
    if not problems:
        try:
            RuleCatalogue.from_config(config.gate)
            InputChecks.from_config(config.input)
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return listing
