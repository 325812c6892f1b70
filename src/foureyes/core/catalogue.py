"""Catalogues of user-facing strings: one JSON file each, every string in every locale.

A catalogue file maps a key (``"chat.send"``, ``"reason.approved"``) to its text in
``en``, ``zh-Hans`` and ``zh-Hant``; a catalogue is complete by construction, so a string
can never be missing in one language only. The web console's strings
(``foureyes/server/console/strings.json``) and the eval reports' strings
(``foureyes/evals/report_strings.json``) are the two catalogues shipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale

__all__ = ["Catalogue"]


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Every string of one catalogue, by key and locale; complete by construction."""

    entries: Mapping[str, Mapping[Locale, str]]
    """Key to its text in each locale."""
    name: str = "catalogue"
    """What the catalogue is, for error messages (``console catalogue``)."""

    @classmethod
    def from_json(cls, data: Any, *, name: str = "catalogue") -> Catalogue:
        """Build a catalogue from the parsed JSON of a catalogue file.

        Raises:
            UsageError: the data is not an object of objects, or an entry lacks a locale,
                names an unknown one, or holds an empty or non-string text. Every problem
                is listed.
        """
        if not isinstance(data, dict):
            raise UsageError(f"the {name} must be a JSON object")
        problems: list[str] = []
        entries: dict[str, Mapping[Locale, str]] = {}
        wanted = {locale.value for locale in Locale}
        for key, texts in data.items():
            if not isinstance(texts, dict):
                problems.append(f"{key}: not an object of texts")
                continue
            if missing := sorted(wanted - set(texts)):
                problems.append(f"{key}: no text for {', '.join(missing)}")
            if unknown := sorted(set(texts) - wanted):
                problems.append(f"{key}: unknown locale {', '.join(unknown)}")
            if any(not isinstance(t, str) or not t.strip() for t in texts.values()):
                problems.append(f"{key}: every text must be a non-empty string")
            entries[key] = MappingProxyType(
                {Locale(tag): text for tag, text in texts.items() if tag in wanted}
            )
        if problems:
            raise UsageError(f"{name}: " + "; ".join(problems))
        return cls(MappingProxyType(entries), name)

    @classmethod
    def packaged(cls, package: str, file: str, *, name: str) -> Catalogue:
        """The catalogue file ``file`` shipped in ``package`` (read once per process).

        Raises:
            UsageError: the packaged file is broken (a bug in this release).
        """
        return _packaged(package, file, name)

    def text(self, key: str, locale: Locale) -> str:
        """The text of ``key`` in ``locale``.

        Raises:
            UsageError: no such key (a template or caller names a string that does not exist).
        """
        try:
            return self.entries[key][locale]
        except KeyError:
            raise UsageError(f"{self.name} has no string {key!r}") from None

    def strings(self, locale: Locale) -> dict[str, str]:
        """Every string in ``locale``, by key."""
        return {key: texts[locale] for key, texts in self.entries.items()}


@cache
def _packaged(package: str, file: str, name: str) -> Catalogue:
    text = resources.files(package).joinpath(file).read_text(encoding="utf-8")
    return Catalogue.from_json(json.loads(text), name=name)
