"""The team's own patterns (``[input.patterns.NAME]``) as input checks.

Each configured entry becomes one deterministic check whose id is its name: its regular
expressions run on the text as written and on its keyword fold, with angle-bracket
look-alikes read as ``<`` ``>`` (as the instruction heuristics run,
:func:`foureyes.inputs.instructions.pattern_spans`), and every match is a finding of the
configured category with reason ``team_pattern``. Compiling happens here, once, and every
problem is a :class:`~foureyes.core.errors.ConfigError` naming the key; the config's own
validation refuses the same patterns at load time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from foureyes.config import InputPatternConfig
from foureyes.core.errors import ConfigError
from foureyes.inputs.check import (
    CHECK_ID,
    CheckFunction,
    CheckInput,
    CheckKind,
    Finding,
    FindingReason,
    InputCategory,
    InputCheck,
    Manifest,
)
from foureyes.inputs.instructions import pattern_spans

__all__ = ["team_checks"]


def team_checks(patterns: Mapping[str, InputPatternConfig]) -> tuple[InputCheck, ...]:
    """One check per configured pattern set, sorted by id.

    Raises:
        ConfigError: an id is not a check id, a pattern does not compile, or a pattern
            matches the empty string; one line per problem.
    """
    problems: list[str] = []
    checks: list[InputCheck] = []
    for name, entry in sorted(patterns.items()):
        if not CHECK_ID.fullmatch(name):
            problems.append(f"input.patterns: {name!r} is not a check id ([a-z][a-z0-9_]*)")
            continue
        compiled: list[re.Pattern[str]] = []
        for pattern in entry.patterns:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                problems.append(f"input.patterns.{name}: {pattern!r} is invalid: {exc}")
                continue
            if regex.fullmatch("") is not None:
                problems.append(f"input.patterns.{name}: {pattern!r} matches the empty string")
                continue
            compiled.append(regex)
        category = InputCategory(entry.category)
        manifest = Manifest(
            id=name,
            detects=entry.detects or "team patterns",
            languages=tuple(entry.languages),
            kind=CheckKind.DETERMINISTIC,
            categories=frozenset({category}),
        )
        checks.append(InputCheck(manifest, _matcher(name, category, tuple(compiled))))
    if problems:
        raise ConfigError(problems)
    return tuple(checks)


def _matcher(
    name: str, category: InputCategory, patterns: tuple[re.Pattern[str], ...]
) -> CheckFunction:
    def check(item: CheckInput) -> Iterator[Finding]:
        spans = {span for pattern in patterns for span in pattern_spans(item, pattern)}
        for start, end in sorted(spans):
            yield Finding(name, category, start, end, FindingReason.TEAM_PATTERN)

    return check
