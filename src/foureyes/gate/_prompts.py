"""The prompt templates, package data under ``prompts/``, loaded once."""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

from foureyes.core.locale import Locale
from foureyes.gate.rules import RuleCatalogue

__all__ = ["LANGUAGE_NAMES", "rules_list", "template"]

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
