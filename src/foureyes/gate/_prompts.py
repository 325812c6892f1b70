"""The prompt templates, package data under ``prompts/``, loaded once."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from string import Template

from foureyes.core.locale import Locale
from foureyes.gate.rules import Rule, RuleCatalogue
from foureyes.llm.prompting import data_block

__all__ = [
    "LANGUAGE_NAMES",
    "NONE",
    "UNKEPT_UNKNOWN",
    "rule_line",
    "rules_list",
    "system_prompt",
    "template",
    "unknowns_list",
]

NONE = "(none)"
"""What a prompt section with nothing in it says."""

UNKEPT_UNKNOWN = (
    "- (an earlier review could not judge something in this conversation; its wording is not kept)"
)
"""How a prompt shows an open unknown whose words the store no longer has (past
``privacy.unknown_retention_days``, or sealed under a key it no longer has)."""

LANGUAGE_NAMES = {
    Locale.EN: "English",
    Locale.ZH_HANS: "Simplified Chinese",
    Locale.ZH_HANT: "Traditional Chinese",
}
"""How a prompt names the language a reply is written in."""


@functools.cache
def template(name: str) -> Template:
    """The template ``prompts/<name>.txt``; placeholders are ``$name``."""
    path = resources.files("foureyes.gate").joinpath(f"prompts/{name}.txt")
    return Template(path.read_text(encoding="utf-8"))


def rule_line(rule: Rule) -> str:
    """A rule as a prompt line: ``- id: description`` (its English description)."""
    return f"- {rule.id}: {rule.description[Locale.EN]}"


def rules_list(catalogue: RuleCatalogue) -> str:
    """The catalogue as prompt lines (:func:`rule_line`)."""
    return "\n".join(rule_line(rule) for rule in catalogue.rules)


_SYSTEM_PROMPTS: dict[tuple[str, int, tuple[tuple[str, object], ...]], tuple[object, str]] = {}
_MAX_SYSTEM_PROMPTS = 64


def system_prompt(name: str, catalogue: RuleCatalogue, **fields: str | int) -> str:
    """The template ``name`` with ``catalogue``'s :func:`rules_list` as ``$rules`` and ``fields``.

    Built once per catalogue and fields: a deployment's system prompts do not change from
    one reply to the next, and each took a few microseconds to build on every call. The
    catalogue is matched by identity (it holds mappings, so it has no hash) and kept
    with its prompt, so a new catalogue never meets an old one's prompt.
    """
    key = (name, id(catalogue), tuple(sorted(fields.items())))
    cached = _SYSTEM_PROMPTS.get(key)
    if cached is not None and cached[0] is catalogue:
        return cached[1]
    text = template(name).substitute(rules=rules_list(catalogue), **fields)
    if len(_SYSTEM_PROMPTS) >= _MAX_SYSTEM_PROMPTS:
        _SYSTEM_PROMPTS.clear()
    _SYSTEM_PROMPTS[key] = (catalogue, text)
    return text


def unknowns_list(unknowns: Sequence[str | None]) -> str:
    """Open unknowns as prompt lines: each text as data, each unkept one as a code line."""
    return (
        "\n".join(UNKEPT_UNKNOWN if u is None else data_block("open_unknown", u) for u in unknowns)
        or NONE
    )
