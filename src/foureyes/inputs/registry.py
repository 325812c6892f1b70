"""The checks a deployment runs, and the catalogue of every check and rule.

Input checks are registered by entry point in the ``foureyes.checks`` group
(:mod:`foureyes.plugins`, the loader of ``foureyes.rules`` and ``foureyes.route_kinds``
too): the built-ins (:data:`BUILTIN_CHECKS`) by foureyes' own ``pyproject.toml``, others by
any installed distribution, each an :class:`~foureyes.inputs.check.InputCheck` whose id is
its entry point's name. :meth:`InputChecks.from_config` adds the team's patterns
(``[input.patterns]``) to them; :func:`catalogue` lists every input check and every output
rule (``foureyes.rules``) with its manifest line, for ``foureyes checks list``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from foureyes import plugins
from foureyes.config import InputConfig
from foureyes.core.errors import ConfigError
from foureyes.core.locale import Locale
from foureyes.inputs.characters import CONTROL_CHARACTERS, INVISIBLE_CHARACTERS
from foureyes.inputs.check import (
    CHECK_ID,
    DEFAULT_MAX_CHARS,
    CheckContext,
    CheckKind,
    InputCategory,
    InputCheck,
    InputScan,
    Manifest,
    scan,
)
from foureyes.inputs.encoded import ENCODED_PAYLOADS
from foureyes.inputs.instructions import INSTRUCTION_OVERRIDE, JAILBREAK_PERSONA
from foureyes.inputs.pii import PII_CHECKS
from foureyes.inputs.team import team_checks

__all__ = [
    "BUILTIN_CHECKS",
    "CatalogueEntry",
    "InputChecks",
    "catalogue",
    "registered_checks",
]

BUILTIN_CHECKS: tuple[InputCheck, ...] = (
    INVISIBLE_CHARACTERS,
    CONTROL_CHARACTERS,
    ENCODED_PAYLOADS,
    INSTRUCTION_OVERRIDE,
    JAILBREAK_PERSONA,
    *PII_CHECKS,
)
"""The input checks foureyes ships, in catalogue order; each is a ``foureyes.checks``
entry point."""

_ANY_LANGUAGE = "*"


def registered_checks() -> tuple[plugins.Plugin[InputCheck], ...]:
    """Every check registered by entry point: the built-ins in their order, then by id.

    Raises:
        ConfigError: an entry point cannot be loaded, is not an :class:`InputCheck` (or
            its id is not its name, its manifest is incomplete, its check is not
            callable), or names a check another distribution registers too.
    """
    order = {check.id: n for n, check in enumerate(BUILTIN_CHECKS)}
    found = plugins.load(plugins.CHECKS, _as_check)
    return tuple(
        sorted(found, key=lambda p: (not p.builtin, order.get(p.name, len(order)), p.name))
    )


def _as_check(name: str, obj: object) -> InputCheck:
    """``obj`` as the check of entry point ``name``, or ``TypeError``/``ValueError`` why not."""
    if not isinstance(obj, InputCheck) or not isinstance(obj.manifest, Manifest):
        raise TypeError(f"a {type(obj).__name__} is not a foureyes.inputs.InputCheck")
    manifest = obj.manifest
    if manifest.id != name or not isinstance(manifest.id, str) or not CHECK_ID.fullmatch(name):
        raise ValueError(
            f"check id {manifest.id!r} must be the entry point's name, [a-z][a-z0-9_]*"
        )
    if not isinstance(manifest.detects, str) or not manifest.detects.strip():
        raise ValueError(f"check {name!r} does not say what it detects")
    if (
        not isinstance(manifest.languages, tuple)
        or not manifest.languages
        or not all(isinstance(lang, str) and lang.strip() for lang in manifest.languages)
    ):
        raise ValueError(f"check {name!r} names no languages (use ('*',) for any)")
    if not isinstance(manifest.kind, CheckKind):
        raise ValueError(f"check {name!r} has kind {manifest.kind!r}, not a CheckKind")
    if (
        not isinstance(manifest.categories, frozenset)
        or not manifest.categories
        or not all(isinstance(c, InputCategory) for c in manifest.categories)
    ):
        raise ValueError(f"check {name!r} has no categories, or one that is not an InputCategory")
    if not callable(obj.check):
        raise TypeError(f"check {name!r} has a check that is not callable")
    return obj


@dataclass(frozen=True, slots=True)
class InputChecks:
    """The checks a deployment runs on input, and the limits it runs them with."""

    checks: tuple[InputCheck, ...]
    """Every check, registered ones first (built-ins first among them), then the team's."""
    max_chars: int = DEFAULT_MAX_CHARS
    """Longest text judged (``[input] max_chars``)."""
    encoded_depth: int = 3
    """Nested encodings decoded (``[input] encoded_depth``)."""

    @classmethod
    def builtin(cls) -> InputChecks:
        """The built-in checks only, without reading any entry point."""
        return cls(BUILTIN_CHECKS)

    @classmethod
    def from_config(cls, config: InputConfig) -> InputChecks:
        """The registered checks plus ``[input.patterns]``, with ``[input]``'s limits.

        Raises:
            ConfigError: a check plugin is broken (:func:`registered_checks`), a team
                pattern does not compile, or a team check reuses a registered id.
        """
        registered = registered_checks()
        owners = {plugin.name: plugin.distribution for plugin in registered}
        clashes = sorted(set(config.patterns) & set(owners))
        if clashes:
            raise ConfigError(
                [
                    f"input.patterns.{name} reuses the id of a check registered by {owners[name]}"
                    for name in clashes
                ]
            )
        team = team_checks(config.patterns)
        return cls(
            tuple(plugin.obj for plugin in registered) + team,
            max_chars=config.max_chars,
            encoded_depth=config.encoded_depth,
        )

    def scan(self, text: str, *, region: str | None = None) -> InputScan:
        """:func:`foureyes.inputs.scan` with these checks and limits."""
        context = CheckContext(region=region, encoded_depth=self.encoded_depth)
        return scan(text, self.checks, context=context, max_chars=self.max_chars)

    def only(self, categories: Iterable[InputCategory]) -> InputChecks:
        """The checks that report at least one of ``categories``, same limits."""
        wanted = frozenset(categories)
        kept = tuple(c for c in self.checks if c.manifest.categories & wanted)
        return InputChecks(kept, self.max_chars, self.encoded_depth)


# The built-in rules' languages: the phrase rules are written in the three locales; the
# others judge length, emptiness, numbers or tool names, in any language, and those only
# the Supervisor judges are in whatever languages its model reads.
_RULE_LANGUAGES = {
    "empty_text": (_ANY_LANGUAGE,),
    "too_long": (_ANY_LANGUAGE,),
    "unverified_resource": (_ANY_LANGUAGE,),
    "tool_not_allowed": (_ANY_LANGUAGE,),
    "diagnosis_claim": ("en", "zh-Hans", "zh-Hant"),
    "therapy_claim": ("en", "zh-Hans", "zh-Hant"),
    "guarantee_claim": ("en", "zh-Hans", "zh-Hant"),
    "unconfirmed_as_fact": ("en", "zh-Hans", "zh-Hant"),
    "reviewer_manipulation": ("en", "zh-Hans", "zh-Hant"),
}
_UNSTATED = ("unstated",)


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """One line of the catalogue: an input check or an output rule."""

    stage: Literal["input", "output"]
    """``input``: a check on what comes in; ``output``: a rule on a candidate reply."""
    id: str
    """The check's or rule's id."""
    detects: str
    """What it detects (a rule: what it forbids, in English)."""
    languages: tuple[str, ...]
    """The languages it is written for; ``*``: any; ``unstated`` for a plugin rule."""
    kind: CheckKind
    """Deterministic code or a model (a rule no code checks is the Supervisor's)."""
    categories: tuple[str, ...]
    """An input check's categories; empty for a rule."""
    distribution: str
    """Who registers it (``foureyes``, a plugin's distribution, or ``config``)."""

    def line(self) -> str:
        """``stage  id  kind  languages  categories  detects  (distribution)``."""
        cats = ",".join(self.categories) or "-"
        return (
            f"{self.stage:<6}  {self.id:<22}  {self.kind:<13}  {','.join(self.languages):<18}"
            f"  {cats:<26}  {self.detects}  ({self.distribution})"
        )

    def as_json(self) -> dict[str, Any]:
        """The entry as ``checks list --json`` would list it."""
        return {
            "stage": self.stage,
            "id": self.id,
            "detects": self.detects,
            "languages": list(self.languages),
            "kind": str(self.kind),
            "categories": list(self.categories),
            "distribution": self.distribution,
        }


def _check_entry(check: InputCheck, distribution: str) -> CatalogueEntry:
    m = check.manifest
    return CatalogueEntry(
        "input", m.id, m.detects, m.languages, m.kind, tuple(sorted(m.categories)), distribution
    )


def catalogue(config: InputConfig | None = None) -> tuple[CatalogueEntry, ...]:
    """Every input check (registered, then the team's) and every output rule.

    The rules are the ``foureyes.rules`` entry points
    (:func:`foureyes.gate.rules.registered_rules`), built-ins first.

    Args:
        config: ``[input]``, whose patterns are listed as checks of distribution
            ``config``; ``None``: none.

    Raises:
        ConfigError: a check or rule plugin is broken, or a team pattern is.
    """
    entries = [_check_entry(p.obj, p.distribution) for p in registered_checks()]
    if config is not None:
        entries += [_check_entry(c, "config") for c in team_checks(config.patterns)]
    entries.append(
        CatalogueEntry(
            "input",
            "model_check",
            "the input_checker role's model, asked about every input by its SHA-256 "
            "(the conversation's arc, the team's topic); "
            + ("on" if config is not None and config.model_check else "off: [input] model_check"),
            ("*",),
            CheckKind.MODEL,
            tuple(sorted(InputCategory)),
            "foureyes",
        )
    )
    # Imported here: the gate will run the input checks, so the gate imports this package,
    # not the other way round at import time.
    from foureyes.gate.rules import registered_rules

    for plugin in registered_rules():
        rule = plugin.obj
        kind = CheckKind.DETERMINISTIC if rule.checked_in_code else CheckKind.MODEL
        languages = _RULE_LANGUAGES.get(rule.id, ("en", "zh-Hans", "zh-Hant"))
        if not plugin.builtin:
            languages = _UNSTATED
        entries.append(
            CatalogueEntry(
                "output",
                rule.id,
                rule.description[Locale.EN],
                languages,
                kind,
                (),
                plugin.distribution,
            )
        )
    return tuple(entries)
