"""docs/evals.md says what the evals have.

The arms its tables list are the shipped suites' arms, and what it calls "not built yet"
is not in the code.
"""

from __future__ import annotations

import re
from pathlib import Path

from foureyes import Guard
from foureyes.evals.suite import load_suite, suite_path

DOC = Path(__file__).resolve().parents[2] / "docs" / "evals.md"
TEXT = DOC.read_text(encoding="utf-8")


def _outside_parentheses(cell: str) -> str:
    """``cell`` without its parenthesised notes (nested ones included)."""
    kept, depth = [], 0
    for char in cell:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


def _section(title: str) -> str:
    start = TEXT.index(f"\n{title}\n")
    end = TEXT.find("\n#", start + len(title) + 2)
    return TEXT[start : None if end < 0 else end]


def test_the_outside_parentheses_reader_keeps_only_the_names() -> None:
    cell = " `a` (the first, see [b](#b)), `c` (one (nested) note) "
    assert re.findall(r"`([^`]+)`", _outside_parentheses(cell)) == ["a", "c"]


def test_the_suites_table_lists_every_arm_of_every_suite_in_order() -> None:
    rows = re.findall(
        r"^\| `([\w-]+)` \| \w+ \| (.*?) \| .*\|$", _section("## Suites, cases, arms"), re.M
    )
    assert {name for name, _ in rows} == {"gate", "triage", "agent-tasks", "review-smoke"}
    for name, arms in rows:
        listed = re.findall(r"`([^`]+)`", _outside_parentheses(arms))
        assert listed == [arm.name for arm in load_suite(suite_path(name)).arms], name


def test_the_agent_arms_table_is_the_suites_arms() -> None:
    table = _section("### Reviewing arms of agent-tasks")
    listed = re.findall(r"^\| `([\w-]+)` \|", table, re.M)
    assert listed == [arm.name for arm in load_suite(suite_path("agent-tasks")).arms]


def test_what_is_not_built_yet_is_not_in_the_code() -> None:
    not_built = _section("## Not built yet")
    # The deliberate tool is built: the library's Guard offers it (docs/library.md) and
    # agent-tasks has an arm offering it to the Primary.
    assert callable(Guard.deliberate) and callable(Guard.deliberate_tool)
    assert "deliberate-offered" in [a.name for a in load_suite(suite_path("agent-tasks")).arms]
    assert "deliberate" not in not_built
    assert "durable prefix" in not_built  # a resumed run still recomputes its prefixes
