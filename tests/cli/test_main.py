"""The top-level group: ``foureyes --help`` lists every command by a line kept beside it.

The listing imports no command module (tests/cli/test_lazy_imports.py), so it reads each
command's help from ``_HELP``; these tests hold every line to the first line of the
command's own help, so the two cannot drift apart.
"""

from __future__ import annotations

import importlib

import pytest
from typer.testing import CliRunner

from foureyes.cli import app

main = importlib.import_module("foureyes.cli.main")  # the package exports a `main` function
runner = CliRunner()


def test_every_command_has_a_help_line_in_the_listed_order() -> None:
    assert list(main._HELP) == list(main._COMMANDS)


@pytest.mark.parametrize("name", list(main._COMMANDS))
def test_each_help_line_is_the_first_line_of_the_commands_own_help(name: str) -> None:
    own = main._COMMANDS[name]().help or ""
    paragraph = own.split("\n\n")[0]
    assert main._HELP[name] == own.splitlines()[0]
    # The listing shows a command's first paragraph: one line here, so nothing is lost.
    assert "\n" not in paragraph


def test_help_lists_each_command_with_its_line() -> None:
    result = runner.invoke(app, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for name, line in main._HELP.items():
        assert any(row.split() == [name, *line.split()] for row in lines), (name, result.output)


def test_a_listed_command_still_runs_and_shows_its_own_help() -> None:
    # The listing's stand-ins are never kept: the command built afterwards is the real one.
    assert runner.invoke(app, ["--help"]).exit_code == 0
    result = runner.invoke(app, ["trace", "--help"])
    assert result.exit_code == 0, result.output
    assert "list" in result.output and "show" in result.output


def test_no_command_prints_the_help_and_exits_2() -> None:
    result = runner.invoke(app, [])
    assert result.exit_code == 2
    assert "Usage:" in result.output and "trace" in result.output


def test_an_unknown_command_is_a_usage_error_naming_it() -> None:
    result = runner.invoke(app, ["trcae"])
    assert result.exit_code == 2
    assert "No such command 'trcae'" in result.output
