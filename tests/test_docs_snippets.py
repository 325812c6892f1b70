"""Every ```python snippet in README.md and docs/*.md runs, so the docs cannot rot.

The snippets of one file run in order in one namespace, on one event loop (top-level
``await`` and ``async with`` allowed, as in ``python -m asyncio``), in an empty working
directory with no ``FOUREYES_*`` variable: the offline default a newcomer has. A ```text
block right after a snippet is what it prints, compared exactly.

A snippet that needs something a test cannot have (a running server, the reader's own
database) is marked on the line before it with ``<!-- not-run: why -->``; it is still
compiled and its imports run, so neither its syntax nor the names it imports can rot, and
the reason must be given.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

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
