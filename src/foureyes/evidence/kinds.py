"""Observation kinds: what a selection may claim, what it may cite, and how code words it.

Each kind names the source kinds of records it may cite, and carries a label and a
rendering template in every locale. Templates are code-owned restatements of the
evidence: ``{slot}`` names a field of the cited record, and nothing else can reach the
text. Kinds come from TOML (pinned)::

    [kinds.exercise_pattern]
    sources = ["lifestyle.exercise"]
    record_sources = ["questionnaire", "wearable"]
    label = {zh-Hans = "运动记录", zh-Hant = "運動記錄", en = "Exercise record"}
    template = {zh-Hans = "来源记录：{value}。", zh-Hant = "來源記錄：{value}。",
                en = "Source record: {value}."}

or from Python (:class:`ObservationKind`, :class:`KindRegistry`).

Slots: ``{value}`` is the record's value when it is a string, ``{source}`` and
``{observed_at}`` are the record's own fields, and any other name is a field of the
record's value when the value is an object. Braces only ever delimit slots (there is no
escape for a literal brace), and format specs, conversions, positional slots and
attribute or index access are refused when the kind is loaded, so a template can only
ever restate a named field, and the database's renderer (:mod:`foureyes.store.rendering`)
fills it by plain substitution to the same bytes. A template without a
slot is refused too: it would store the same prose as a durable observation whatever
the cited record says.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from foureyes.config import read_text_file, validation_problems
from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import ConfigError
from foureyes.core.locale import Locale
from foureyes.evidence.catalog import SOURCE_KIND_PATTERN

__all__ = [
    "ITEM_SLOTS",
    "KindRegistry",
    "ObservationKind",
    "SLOT_PATTERN",
    "Template",
]

ITEM_SLOTS = frozenset({"value", "source", "observed_at"})
"""Slot names that always mean the record's own fields, never a field of its value."""

SLOT_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""What a slot name looks like (matched whole): the field names a template may cite."""
_SLOT = SLOT_PATTERN
_BRACED = re.compile(r"\{([^{}]*)\}")
_BRACES = re.compile(r"[{}]")
_MAX_TEMPLATE_CHARS = 2000
_MAX_LABEL_CHARS = 200


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed rendering template: literal text and named slots, in order.

    Build one with :meth:`parse`.
    """

    text: str
    """The template as written."""
    parts: tuple[tuple[str, str | None], ...]
    """``(literal, slot)`` pairs in order; ``slot`` is ``None`` where only text follows."""

    @classmethod
    def parse(cls, text: str) -> Template:
        """Parse ``text``, refusing anything but literal text and ``{name}`` slots.

        The grammar is the one the database checks too (``literal ({name} literal)+``,
        literal text without ``{`` or ``}``), so both renderers fill the same slots.

        Raises:
            ValueError: naming what is wrong (a brace outside a slot, a format spec, a
                conversion, a positional slot, attribute or index access, no slot).
        """
        if not text.strip():
            raise ValueError("a template must not be empty")
        if len(text) > _MAX_TEMPLATE_CHARS:
            raise ValueError(f"a template must have at most {_MAX_TEMPLATE_CHARS} characters")
        parts: list[tuple[str, str | None]] = []
        end = 0
        for match in _BRACED.finditer(text):
            literal, name = text[end : match.start()], match.group(1)
            if _BRACES.search(literal):
                raise ValueError(f"template {text[:80]!r} has a brace outside a {{slot}}")
            if not _SLOT.fullmatch(name):
                raise ValueError(
                    f"template slot {{{name}}} must be a plain field name (no format, "
                    "conversion, position, attribute or index)"
                )
            parts.append((literal, name))
            end = match.end()
        tail = text[end:]
        if _BRACES.search(tail):
            raise ValueError(f"template {text[:80]!r} has a brace outside a {{slot}}")
        if not parts:
            # Invariant 8: text that cites no field of the record is prose, not evidence.
            raise ValueError(f"template {text[:80]!r} has no {{slot}}: it must restate the record")
        if tail:
            parts.append((tail, None))
        return cls(text=text, parts=tuple(parts))

    @property
    def slots(self) -> tuple[str, ...]:
        """The slot names, in order of appearance (repeats kept)."""
        return tuple(slot for _, slot in self.parts if slot is not None)


_Label = Annotated[str, StringConstraints(min_length=1, max_length=_MAX_LABEL_CHARS)]


class ObservationKind(BaseModel):
    """One kind of durable observation.

    Raises:
        ValidationError: on construction, when a field is malformed, a locale is missing,
            or a template is not one of literal text and plain slots.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    """The kind's name, as a selection writes it (``exercise_pattern``)."""
    sources: tuple[Annotated[str, Field(max_length=128, pattern=SOURCE_KIND_PATTERN)], ...] = Field(
        min_length=1
    )
    """Source kinds of the records it may cite (kept sorted, without repeats); a record of
    another kind is ``kind_incompatible``."""
    record_sources: tuple[Annotated[str, Field(min_length=1, max_length=256)], ...] = ()
    """The record sources (a record's ``source``: ``questionnaire``, ``wearable``) it
    accepts, kept sorted; a record from another is ``source_incompatible``. Empty: any."""
    label: dict[Locale, _Label]
    """Its label in every locale."""
    template: dict[Locale, str]
    """Its rendering template in every locale."""
    _templates: dict[Locale, Template] = PrivateAttr()

    @field_validator("sources", "record_sources")
    @classmethod
    def _sorted(cls, sources: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(sources)))

    @model_validator(mode="after")
    def _complete(self) -> ObservationKind:
        missing = [
            f"{field} lacks locale {locale.value}"
            for field, values in (("label", self.label), ("template", self.template))
            for locale in Locale
            if locale not in values
        ]
        blank = [
            f"label.{loc.value} is blank" for loc, text in self.label.items() if not text.strip()
        ]
        if missing or blank:
            raise ValueError("; ".join(missing + blank))
        templates, problems = {}, []
        for locale, text in self.template.items():
            try:
                templates[locale] = Template.parse(text)
            except ValueError as exc:
                problems.append(f"template.{locale.value}: {exc}")
        if problems:
            raise ValueError("; ".join(problems))
        self._templates = templates
        return self

    def may_cite(self, source_kind: str) -> bool:
        """Whether a record of ``source_kind`` may back this kind."""
        return source_kind in self.sources

    def accepts_source(self, source: str) -> bool:
        """Whether a record from ``source`` may back this kind."""
        return not self.record_sources or source in self.record_sources

    def template_for(self, locale: Locale) -> Template:
        """The parsed template of ``locale``."""
        return self._templates[locale]


class _KindsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kinds: dict[str, Any] = Field(min_length=1)


class KindRegistry:
    """The observation kinds an application allows, by name, with their digest.

    Raises:
        ConfigError: on construction, when ``kinds`` is empty or repeats a name.
    """

    def __init__(self, kinds: Iterable[ObservationKind]) -> None:
        """Register ``kinds``."""
        by_name: dict[str, ObservationKind] = {}
        problems = []
        for kind in kinds:
            if kind.name in by_name:
                problems.append(f"kind {kind.name!r} is defined more than once")
            by_name[kind.name] = kind
        if not by_name:
            problems.append("at least one observation kind is needed")
        if problems:
            raise ConfigError(problems)
        self._kinds = dict(sorted(by_name.items()))
        document = {name: kind.model_dump(mode="json") for name, kind in self._kinds.items()}
        self._sha256 = sha256_hex(canonical_json(document))

    @classmethod
    def from_mapping(cls, data: Any, *, where: str = "kinds") -> KindRegistry:
        """Build the registry from a decoded kinds document: ``{"kinds": {name: {...}}}``.

        Raises:
            ConfigError: naming every key at fault (``kinds.NAME.template``, ...).
        """
        try:
            document = _KindsFile.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(
                [f"{where}: {p}" for p in validation_problems(exc, _KindsFile)]
            ) from None
        kinds, problems = [], []
        for name, spec in document.kinds.items():
            if not isinstance(spec, Mapping):
                problems.append(f"{where}: kinds.{name} must be a table")
                continue
            try:
                kinds.append(ObservationKind.model_validate({**spec, "name": name}))
            except ValidationError as exc:
                problems += [
                    f"{where}: kinds.{name}.{p}" for p in validation_problems(exc, ObservationKind)
                ]
        if problems:
            raise ConfigError(problems)
        return cls(kinds)

    @classmethod
    def from_toml(cls, text: str, *, where: str = "kinds") -> KindRegistry:
        """Build the registry from TOML text in the pinned form.

        Raises:
            ConfigError: the text is not TOML, or a kind is malformed.
        """
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([f"{where} is not valid TOML: {exc}"]) from None
        return cls.from_mapping(data, where=where)

    @classmethod
    def from_file(cls, path: str | Path) -> KindRegistry:
        """Build the registry from a TOML file.

        Raises:
            ConfigError: the file is missing, unreadable, not TOML, or a kind is malformed.
        """
        return cls.from_toml(read_text_file(path, "kinds file"), where=str(path))

    @property
    def sha256(self) -> str:
        """SHA-256 of the canonical JSON of every kind; persisted observations name it."""
        return self._sha256

    @property
    def names(self) -> tuple[str, ...]:
        """The kind names, sorted."""
        return tuple(self._kinds)

    def get(self, name: str) -> ObservationKind | None:
        """The kind called ``name``, or ``None``."""
        return self._kinds.get(name)

    def citing(self, source_kind: str) -> tuple[ObservationKind, ...]:
        """The kinds that may cite a record of ``source_kind``, by name."""
        return tuple(kind for kind in self._kinds.values() if kind.may_cite(source_kind))

    def __iter__(self) -> Iterator[ObservationKind]:
        return iter(self._kinds.values())

    def __len__(self) -> int:
        return len(self._kinds)

    def __repr__(self) -> str:
        return f"KindRegistry(names={list(self._kinds)!r})"
