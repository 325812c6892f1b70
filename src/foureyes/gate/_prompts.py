"""The prompt templates, package data under ``prompts/``, loaded once."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from string import Template

from foureyes.core.locale import Locale
from foureyes.gate.rules import RuleCatalogue
from foureyes.llm.prompting import data_block

__all__ = ["LANGUAGE_NAMES", "NONE", "UNKEPT_UNKNOWN", "rules_list", "template", "unknowns_list"]

NONE = "(none)"
"""What a prompt section with nothing in it says."""

UNKEPT_UNKNOWN = (
    "- (an earlier review could not judge something in this conversation; its wording is not kept)"
)
"""How a prompt shows an open unknown whose text the store does not keep."""

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


def rules_list(catalogue: RuleCatalogue) -> str:
    """The catalogue as prompt lines: ``- id: description`` (English descriptions)."""
    return "\n".join(f"- {rule.id}: {rule.description[Locale.EN]}" for rule in catalogue.rules)


def unknowns_list(unknowns: Sequence[str | None]) -> str:
    """Open unknowns as prompt lines: each text as data, each unkept one as a code line."""
    return (
        "\n".join(UNKEPT_UNKNOWN if u is None else data_block("open_unknown", u) for u in unknowns)
        or NONE
    )
