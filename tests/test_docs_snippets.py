"""Every snippet of README.md and docs/*.md is checked, so the docs cannot rot.

```python blocks run. The snippets of one file run in order in one namespace, on one
event loop (top-level ``await`` and ``async with`` allowed, as in ``python -m asyncio``),
in an empty working directory with no ``FOUREYES_*`` variable: the offline default a
newcomer has. A ```text block right after a snippet is what it prints, compared exactly.
A snippet that needs something a test cannot have (a running server, the reader's own
database) is marked on the line before it with ``<!-- not-run: why -->``; it is still
compiled and its imports run, so neither its syntax nor the names it imports can rot, and
the reason must be given.

```toml blocks are what `foureyes config check` accepts (with every API-key variable they
name set, and the route kinds a ``pyproject`` block of the same page registers), from the
repository's root (so the files they name are the repository's). A block that is another
file of foureyes says which on the line before it, ``<!-- toml: KIND -->``, and is read by
that file's own loader: ``scenario`` (``foureyes simulate --scenario``), ``texts_file``
(``[gate] texts_file``), ``kinds_file`` (``[evidence] kinds_file``) or ``pyproject`` (a
plugin's, whose entry points must be foureyes' groups).

Every line of a ```sh, ```bash or ```console block (in ``console``, the lines after a
``$`` prompt) that runs ``foureyes`` names a real command, whose ``--help`` succeeds, and
only options that command (or a group above it) has.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
import os
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer import _click as click  # the click typer vendors, as foureyes.cli.main uses it
from typer.core import TyperGroup
from typer.testing import CliRunner

from foureyes.cli.main import app
from foureyes.config import GateConfig, load_config
from foureyes.core.errors import ConfigError
from foureyes.evidence import KindRegistry
from foureyes.gate import RuleCatalogue
from foureyes.gate.fallback import load_fallback_texts
from foureyes.llm.simulate import parse_scenario
from foureyes.plugins import CHECKS, ROUTE_KINDS, RULES

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<why>[^>]*?)\s*-->\s*\Z")


@dataclass(frozen=True)
class Snippet:
    """One ```python block: its code, its line, why it is not run, what it prints."""

    path: Path
    line: int
    code: str
    not_run: str | None
    output: str | None


def snippets(path: Path) -> list[Snippet]:
    """The python blocks of ``path``, in order, with their markers and output blocks."""
    text = path.read_text(encoding="utf-8")
    blocks = list(_FENCE.finditer(text))
    found = []
    for i, block in enumerate(blocks):
        if block.group(1) != "python":
            continue
        before = text[blocks[i - 1].end() if i else 0 : block.start()]
        marker = _NOT_RUN.search(before)
        after = blocks[i + 1] if i + 1 < len(blocks) else None
        output = None
        if after is not None and after.group(1) == "text":
            if not text[block.end() : after.start()].strip():
                output = after.group(2)
        found.append(
            Snippet(
                path=path,
                line=text.count("\n", 0, block.start()) + 1,
                code=block.group(2),
                not_run=None if marker is None else marker.group("why"),
                output=output,
            )
        )
    return found


def _compile(snippet: Snippet) -> object:
    name = f"{snippet.path.relative_to(ROOT)}:{snippet.line}"
    # Line numbers in a traceback are the Markdown file's.
    source = "\n" * snippet.line + snippet.code
    return compile(source, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_extractor_finds_markers_and_outputs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not-run: needs a server -->\n```python\nx = 1\n```\n\n"
        "```python\nprint(2)\n```\n\n```text\n2\n```\n\n"
        "```python\nprint(3)\n```\nprose\n```text\nnot its output\n```\n",
        encoding="utf-8",
    )
    found = snippets(page)
    assert [(s.code, s.not_run, s.output) for s in found] == [
        ("x = 1\n", "needs a server", None),
        ("print(2)\n", None, "2\n"),
        ("print(3)\n", None, None),
    ]


def test_the_docs_have_runnable_snippets() -> None:
    every = [s for path in DOCS for s in snippets(path)]
    assert any(s.path.name == "library.md" and s.output for s in every)
    assert {p.name for p in WITH_SNIPPETS} >= {"library.md", "gateway.md", "evidence.md"}
    assert all(s.not_run != "" for s in every), "a not-run snippet gives its reason"


def _imports(snippet: Snippet) -> str:
    """The snippet's top-level import statements alone."""
    tree = ast.parse(snippet.code)
    kept = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


WITH_SNIPPETS = [path for path in DOCS if snippets(path)]


@pytest.mark.parametrize(
    "path", WITH_SNIPPETS, ids=[str(p.relative_to(ROOT)) for p in WITH_SNIPPETS]
)
async def test_every_snippet_runs_and_prints_what_the_page_shows(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = snippets(path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FOUREYES_STORE__URL")
    namespace: dict[str, object] = {"__name__": "__snippet__"}
    for snippet in found:
        code = _compile(snippet)
        if snippet.not_run is not None:
            exec(_imports(snippet), {})  # noqa: S102 - the project's own docs
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            result = eval(code, namespace)  # noqa: S307 - the project's own docs
            if inspect.iscoroutine(result):
                await result
        if snippet.output is not None:
            where = f"{path.name}:{snippet.line}"
            assert printed.getvalue() == snippet.output, f"{where} printed otherwise"


# --- every block, by language ---------------------------------------------------------------

_MARKER = re.compile(r"<!--\s*(?P<what>[\w-]+):\s*(?P<arg>[^>]*?)\s*-->\s*\Z")
_SHELLS = ("sh", "bash", "console")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, code, line and the marker before it."""

    path: Path
    line: int
    language: str
    code: str
    marker: tuple[str, str] | None
    """``(what, argument)`` of an ``<!-- what: argument -->`` right before the fence."""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    found = list(_FENCE.finditer(text))
    result = []
    for i, block in enumerate(found):
        marker = _MARKER.search(text[found[i - 1].end() if i else 0 : block.start()])
        result.append(
            Block(
                path=path,
                line=text.count("\n", 0, block.start()) + 1,
                language=block.group(1),
                code=block.group(2),
                marker=None if marker is None else (marker.group("what"), marker.group("arg")),
            )
        )
    return result


EVERY_BLOCK = [block for path in DOCS for block in blocks(path)]
TOML_BLOCKS = [b for b in EVERY_BLOCK if b.language == "toml"]


def test_blocks_and_their_markers_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- toml: scenario -->\n```toml\n[[models.m]]\n```\n\n"
        "```sh\nfoureyes --help\n```\n<!-- not-run: why -->\n\n```python\nx = 1\n```\n",
        encoding="utf-8",
    )
    found = blocks(page)
    assert [(b.language, b.code, b.marker, b.line) for b in found] == [
        ("toml", "[[models.m]]\n", ("toml", "scenario"), 2),
        ("sh", "foureyes --help\n", None, 6),
        ("python", "x = 1\n", ("not-run", "why"), 11),
    ]


def test_every_marker_is_one_the_tests_honour() -> None:
    kinds = set(_TOML_FILES)
    for block in EVERY_BLOCK:
        if block.marker is None:
            continue
        what, arg = block.marker
        if what == "toml":
            assert block.language == "toml" and arg in kinds, f"{block.where}: {block.marker}"
        else:
            assert (what, block.language) == ("not-run", "python") and arg, block.where
    assert len(TOML_BLOCKS) >= 10
    assert {b.path.name for b in TOML_BLOCKS} >= {"README.md", "gateway.md", "plugins.md"}


def _page_route_kinds(path: Path) -> set[str]:
    """The route kinds a ``pyproject`` block of the page registers."""
    kinds: set[str] = set()
    for block in blocks(path):
        if block.marker == ("toml", "pyproject"):
            groups = tomllib.loads(block.code)["project"].get("entry-points", {})
            kinds |= set(groups.get(ROUTE_KINDS, {}))
    return kinds


def _config_check(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``foureyes config check`` of the block, from the repository root, its secrets set."""
    path = tmp_path / "foureyes.toml"
    path.write_text(block.code, encoding="utf-8")
    monkeypatch.chdir(ROOT)
    secrets = {n: "set-by-the-docs-test" for n in load_config(path, environ={}).missing_secrets({})}
    result = CliRunner().invoke(
        app, ["config", "check", "--json", "--config", str(path)], env=secrets
    )
    if result.exit_code == 0:
        return
    body = json.loads(result.stdout)
    kinds = _page_route_kinds(block.path)
    problems = [
        p
        for p in body["problems"]
        if not any(p.startswith("routes.") and f".kind {k!r} is unknown" in p for k in kinds)
    ]
    assert problems == [], f"{block.where}: {problems}"


def _scenario(block: Block, tmp_path: Path) -> None:
    parse_scenario(tomllib.loads(block.code), source=block.where)


def _texts_file(block: Block, tmp_path: Path) -> None:
    path = tmp_path / "texts.toml"
    path.write_text(block.code, encoding="utf-8")
    gate = GateConfig()
    load_fallback_texts(path, gate=gate, catalogue=RuleCatalogue.from_config(gate))


def _kinds_file(block: Block, tmp_path: Path) -> None:
    assert KindRegistry.from_toml(block.code, where=block.where).names


def _pyproject(block: Block, tmp_path: Path) -> None:
    project = tomllib.loads(block.code)["project"]
    groups = project["entry-points"]
    assert set(groups) <= {ROUTE_KINDS, RULES, CHECKS}, f"{block.where}: {set(groups)}"
    for entries in groups.values():
        for name, value in entries.items():
            assert re.fullmatch(r"[a-z][a-z0-9_]*", name), f"{block.where}: {name}"
            assert re.fullmatch(r"[\w.]+:[\w.]+", value), f"{block.where}: {value}"
    assert "foureyes" in project["dependencies"]


_TOML_FILES: dict[str, Callable[[Block, Path], None]] = {
    "scenario": _scenario,
    "texts_file": _texts_file,
    "kinds_file": _kinds_file,
    "pyproject": _pyproject,
}


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=[b.where for b in TOML_BLOCKS])
def test_every_toml_block_is_a_file_foureyes_accepts(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("FOUREYES_")]:
        monkeypatch.delenv(name)
    try:
        if block.marker is None:
            _config_check(block, tmp_path, monkeypatch)
        else:
            _TOML_FILES[block.marker[1]](block, tmp_path)
    except ConfigError as exc:
        pytest.fail(f"{block.where}: {list(exc.problems)}", pytrace=False)


@dataclass(frozen=True)
class Command:
    """One ``foureyes ...`` command line of a shell block."""

    block: Block
    words: tuple[str, ...]
    """Its words after ``foureyes``, as the shell splits them (comments dropped)."""


def shell_commands(block: Block) -> list[Command]:
    """The ``foureyes`` command lines of a shell block (continued lines joined)."""
    lines, pending = [], ""
    for raw in block.code.splitlines():
        if block.language == "console" and not pending:
            if not raw.startswith("$ "):
                continue  # output
            raw = raw[2:]
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    found = []
    for line in lines:
        if line.split(maxsplit=1)[:1] == ["foureyes"]:
            found.append(Command(block, tuple(shlex.split(line, comments=True)[1:])))
    return found


def test_shell_lines_are_split_as_a_shell_would(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```console\n$ foureyes trace list \\\n    --limit 3   # recent\nfoureyes output\n```\n"
        "```sh\nfoureyes eval run gate  # a comment --not-an-option\nmake serve\n```\n",
        encoding="utf-8",
    )
    console, sh = blocks(page)
    assert [c.words for c in shell_commands(console)] == [("trace", "list", "--limit", "3")]
    assert [c.words for c in shell_commands(sh)] == [("eval", "run", "gate")]


def resolve(words: tuple[str, ...]) -> tuple[list[str], list[click.Command]]:
    """The subcommand path of ``words`` and the commands along it, root first.

    A word after a group that names none of its commands fails the test.
    """
    root = typer.main.get_command(app)
    ctx = click.Context(root)
    path, chain = [], [root]
    for word in words:
        current = chain[-1]
        if not isinstance(current, TyperGroup) or word.startswith("-"):
            break
        sub = current.get_command(ctx, word)
        assert sub is not None, f"foureyes {' '.join(path)} has no command {word!r}"
        path.append(word)
        chain.append(sub)
    return path, chain


def _options(chain: list[click.Command]) -> set[str]:
    return {
        opt
        for command in chain
        for param in command.params
        for opt in (*param.opts, *param.secondary_opts)
        if opt.startswith("-")
    } | {"--help"}


SHELL_COMMANDS = [c for b in EVERY_BLOCK if b.language in _SHELLS for c in shell_commands(b)]


def test_the_docs_name_commands_in_shell_blocks() -> None:
    assert len(SHELL_COMMANDS) >= 10
    assert {c.block.path.name for c in SHELL_COMMANDS} >= {"evals.md", "risk.md", "simulate.md"}
    plain = [b.where for b in EVERY_BLOCK if not b.language and "\nfoureyes " in "\n" + b.code]
    assert plain == [], "a block of foureyes commands says its language (```sh)"


@pytest.mark.parametrize(
    "command",
    SHELL_COMMANDS,
    ids=[f"{c.block.where}:foureyes {' '.join(c.words[:3])}" for c in SHELL_COMMANDS],
)
def test_every_foureyes_line_is_a_real_command_with_real_options(command: Command) -> None:
    path, chain = resolve(command.words)
    assert not isinstance(chain[-1], TyperGroup), (
        f"{command.block.where}: foureyes {' '.join(path)} is a group, not a command"
    )
    known = _options(chain)
    used = {w.split("=", 1)[0] for w in command.words[len(path) :] if w.startswith("-")}
    assert used <= known, f"{command.block.where}: unknown option(s) {sorted(used - known)}"
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, f"{command.block.where}: {result.output}"


def test_a_misspelt_command_or_option_is_caught() -> None:
    with pytest.raises(AssertionError, match="has no command 'lsit'"):
        resolve(("trace", "lsit"))
    path, chain = resolve(("trace", "list", "--limit", "3"))
    assert path == ["trace", "list"] and "--limit" in _options(chain)
    assert "--limt" not in _options(chain)
    assert isinstance(resolve(("trace",))[1][-1], TyperGroup)
