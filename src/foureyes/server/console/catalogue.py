"""The console's user-interface strings: one catalogue file, every string in every locale.

``strings.json`` maps a key (``"chat.send"``, ``"reason.approved"``) to its text in
``en``, ``zh-Hans`` and ``zh-Hant``. The page renders its static labels from it and hands
the JavaScript the strings of the page's locale, so every word on screen comes from this
one file. Keys of closed sets are the wire values they label (``reason.<code>``,
``level.<level>``, ``category.<l0 category>``), so the script looks them up directly.
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

_FILE = "strings.json"


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Every console string, by key and locale; complete by construction."""

    entries: Mapping[str, Mapping[Locale, str]]
    """Key to its text in each locale."""

    @classmethod
    def from_json(cls, data: Any) -> Catalogue:
        """Build a catalogue from the parsed JSON of a catalogue file.

        Raises:
            UsageError: the data is not an object of objects, or an entry lacks a locale,
                names an unknown one, or holds an empty or non-string text. Every problem
                is listed.
        """
        if not isinstance(data, dict):
            raise UsageError("the console catalogue must be a JSON object")
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
                {Locale(name): text for name, text in texts.items() if name in wanted}
            )
        if problems:
            raise UsageError("console catalogue: " + "; ".join(problems))
        return cls(MappingProxyType(entries))

    @classmethod
    def packaged(cls) -> Catalogue:
        """The catalogue shipped with foureyes (read once per process).

        Raises:
            UsageError: the packaged file is broken (a bug in this release).
        """
        return _packaged()

    def text(self, key: str, locale: Locale) -> str:
        """The text of ``key`` in ``locale``.

        Raises:
            UsageError: no such key (a template or caller names a string that does not exist).
        """
        try:
            return self.entries[key][locale]
        except KeyError:
            raise UsageError(f"console catalogue has no string {key!r}") from None

    def strings(self, locale: Locale) -> dict[str, str]:
        """Every string in ``locale``, by key."""
        return {key: texts[locale] for key, texts in self.entries.items()}


@cache
def _packaged() -> Catalogue:
    text = resources.files(__package__ or __name__).joinpath(_FILE).read_text(encoding="utf-8")
    return Catalogue.from_json(json.loads(text))
