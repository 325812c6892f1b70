"""Restricted fallback replies: what goes out when no candidate may, by mode and reason family.

Every built-in fallback is fixed text written here, in zh-Hans, zh-Hant and en: no model
wrote it, so nothing in it needs review. None claims to be therapy, gives a diagnosis or
a phone number (crisis resources are rendered by code and appended where the policy
asks), and an ``insufficient`` fallback asks rather than pretending to know.

The wording depends on the :class:`ReplyMode`: in ``support`` mode foureyes' own
Counselor answers people who came for support, so its fallbacks say so; in ``guard``
mode the reply was the team's own model's (or its own draft, ``/v1/check``), which may be
a front desk, so its fallbacks are neutral. Only the crisis reply (family
``prohibited``) is the same in both.

A team replaces any of these with its own words in ``[gate] texts_file``
(:func:`load_fallback_texts`): a TOML file of tables by mode, reason class (a family, or
one reason code) and locale, each text checked at start-up by the same code rules a
draft meets. A text there never removes the crisis resources: they are a part of the
release of their own (:mod:`foureyes.gate.release`), rendered by code from the registry.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from foureyes.config import GateConfig, read_text_file
from foureyes.core.errors import ConfigError, UsageError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate.rules import RuleCatalogue, RuleContext
from foureyes.risk.resources import ResourceRegistry, configured_registry, default_registry

if TYPE_CHECKING:
    from foureyes.config import Config

__all__ = [
    "FallbackFamily",
    "FallbackTexts",
    "ReplyMode",
    "configured_texts",
    "fallback_source",
    "fallback_text",
    "family_of",
    "load_fallback_texts",
    "parse_fallback_texts",
]


class FallbackFamily(StrEnum):
    """The kind of fallback a reason calls for; one text per family, mode and locale."""

    HELD_BACK = "held_back"
    """A candidate existed but was judged unfit: rejected, a rule fired, a tool it calls
    is not allowed, or the verdict named other text."""
    CANNOT_JUDGE = "cannot_judge"
    """The Supervisor said it lacks information; the reply asks instead of assuming."""
    UNAVAILABLE = "unavailable"
    """No judged candidate: drafting or review failed, or time or budget ran out."""
    PROHIBITED = "prohibited"
    """Triage forbade free generation; the reply leads to crisis resources (the crisis
    reply: the code-rendered resources always follow it)."""


class ReplyMode(StrEnum):
    """Whose draft the gate judged, which sets the wording of its fallbacks."""

    SUPPORT = "support"
    """foureyes' own Counselor drafted (``server.mode = "support"``,
    :meth:`foureyes.Guard.reply`): the fallbacks speak to someone seeking support."""
    GUARD = "guard"
    """The team's own model drafted (``server.mode = "guard"``), or the caller gave its
    own draft (``POST /v1/check``, :meth:`foureyes.Guard.check`, the integrations): the
    fallbacks are neutral, fit for a front desk as for any other assistant."""


_FAMILIES: Mapping[ReasonCode, FallbackFamily] = MappingProxyType(
    {
        ReasonCode.REJECTED: FallbackFamily.HELD_BACK,
        ReasonCode.RULE_VIOLATION: FallbackFamily.HELD_BACK,
        ReasonCode.VERDICT_MISMATCH: FallbackFamily.HELD_BACK,
        ReasonCode.TOOL_NOT_ALLOWED: FallbackFamily.HELD_BACK,
        ReasonCode.INPUT_BLOCKED: FallbackFamily.HELD_BACK,
        ReasonCode.INPUT_RESTRICTED: FallbackFamily.HELD_BACK,
        ReasonCode.INPUT_UNCHECKED: FallbackFamily.UNAVAILABLE,
        ReasonCode.INSUFFICIENT: FallbackFamily.CANNOT_JUDGE,
        ReasonCode.REVIEW_TIMEOUT: FallbackFamily.UNAVAILABLE,
        ReasonCode.REVIEW_FAILED: FallbackFamily.UNAVAILABLE,
        ReasonCode.REVIEW_MALFORMED: FallbackFamily.UNAVAILABLE,
        ReasonCode.DRAFT_FAILED: FallbackFamily.UNAVAILABLE,
        ReasonCode.DEADLINE_EXCEEDED: FallbackFamily.UNAVAILABLE,
        ReasonCode.BUDGET_EXHAUSTED: FallbackFamily.UNAVAILABLE,
        ReasonCode.GENERATION_PROHIBITED: FallbackFamily.PROHIBITED,
    }
)

_CRISIS: Mapping[Locale, str] = MappingProxyType(
    {
        Locale.EN: "I am really glad you told me. Your safety matters most right now, "
        "and I want you to be able to talk to a person who can help straight away.",
        Locale.ZH_HANS: "谢谢你愿意告诉我。你现在的安全最重要，"
        "我希望你能马上和能够提供帮助的人谈一谈。",
        Locale.ZH_HANT: "謝謝你願意告訴我。你現在的安全最重要，"
        "我希望你能馬上和能夠提供幫助的人談一談。",
    }
)

_SUPPORT_TEXTS: Mapping[FallbackFamily, Mapping[Locale, str]] = MappingProxyType(
    {
        FallbackFamily.HELD_BACK: {
            Locale.EN: "I want to be careful with what I say here, so I will keep this short: "
            "what you are going through matters, and I am listening. If you like, tell me a "
            "little more about how you are feeling right now.",
            Locale.ZH_HANS: "我想谨慎一些，所以先简短地回复你：你正在经历的事情很重要，我在听。"
            "如果你愿意，可以再多说一点你现在的感受。",
            Locale.ZH_HANT: "我想謹慎一些，所以先簡短地回覆你：你正在經歷的事情很重要，我在聽。"
            "如果你願意，可以再多說一點你現在的感受。",
        },
        FallbackFamily.CANNOT_JUDGE: {
            Locale.EN: "I do not want to assume I understand something I may not. Could you "
            "tell me a bit more about what is happening, in your own words? I am here to "
            "listen.",
            Locale.ZH_HANS: "我不想在没有真正理解的情况下妄下判断。你愿意用自己的话再多说一点"
            "正在发生的事情吗？我在这里听你说。",
            Locale.ZH_HANT: "我不想在沒有真正理解的情況下妄下判斷。你願意用自己的話再多說一點"
            "正在發生的事情嗎？我在這裡聽你說。",
        },
        FallbackFamily.UNAVAILABLE: {
            Locale.EN: "I am sorry, I cannot give you a proper reply right now. What you are "
            "going through matters. If you can, please try again in a moment, or reach out "
            "to someone you trust.",
            Locale.ZH_HANS: "抱歉，我现在没办法好好回复你。你正在经历的事情很重要。"
            "如果可以，请稍后再试，或者联系一位你信任的人。",
            Locale.ZH_HANT: "抱歉，我現在沒辦法好好回覆你。你正在經歷的事情很重要。"
            "如果可以，請稍後再試，或者聯繫一位你信任的人。",
        },
        FallbackFamily.PROHIBITED: _CRISIS,
    }
)

_GUARD_TEXTS: Mapping[FallbackFamily, Mapping[Locale, str]] = MappingProxyType(
    {
        FallbackFamily.HELD_BACK: {
            Locale.EN: "Sorry, I can't help with that here right now. You could ask in a "
            "different way, or contact the team behind this service through another channel.",
            Locale.ZH_HANS: "抱歉，这个请求我现在没法在这里帮你处理。你可以换一种方式再问，"
            "或者通过其他渠道联系提供这项服务的团队。",
            Locale.ZH_HANT: "抱歉，這個請求我現在沒辦法在這裡幫你處理。你可以換一種方式再問，"
            "或者透過其他管道聯絡提供這項服務的團隊。",
        },
        FallbackFamily.CANNOT_JUDGE: {
            Locale.EN: "I'm not sure I understood your request well enough to answer it. "
            "Could you tell me a bit more about what you need?",
            Locale.ZH_HANS: "我不确定是否理解了你的请求，所以暂时没法回答。"
            "你能再多说一点你需要什么吗？",
            Locale.ZH_HANT: "我不確定是否理解了你的請求，所以暫時沒辦法回答。"
            "你能再多說一點你需要什麼嗎？",
        },
        FallbackFamily.UNAVAILABLE: {
            Locale.EN: "Sorry, I can't give you an answer right now. Please try again in a moment.",
            Locale.ZH_HANS: "抱歉，我现在没法给你答复。请稍后再试。",
            Locale.ZH_HANT: "抱歉，我現在沒辦法給你答覆。請稍後再試。",
        },
        FallbackFamily.PROHIBITED: _CRISIS,
    }
)

_BUILTIN: Mapping[ReplyMode, Mapping[FallbackFamily, Mapping[Locale, str]]] = MappingProxyType(
    {ReplyMode.SUPPORT: _SUPPORT_TEXTS, ReplyMode.GUARD: _GUARD_TEXTS}
)

FallbackSource = Literal["builtin", "texts_file"]
"""Where a fallback's wording came from: foureyes' own text, or ``gate.texts_file``."""


@dataclass(frozen=True, slots=True)
class FallbackTexts:
    """A team's own fallback wording (``[gate] texts_file``), checked by the rules.

    Made by :func:`parse_fallback_texts` (structure only) or :func:`load_fallback_texts`
    (the file, then every text by the rules a draft meets). An entry names a reason
    class of a mode and has a text in every locale; a class is a family (every reason
    of it) or one reason code, which wins over its family. What no entry names keeps
    the built-in text.
    """

    entries: Mapping[ReplyMode, Mapping[str, Mapping[Locale, str]]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Per mode, per class (a :class:`FallbackFamily` or a :class:`ReasonCode` value),
    the text in each locale."""
    source: str | None = None
    """The file they were read from, if any."""

    def get(self, reason: ReasonCode, locale: Locale, mode: ReplyMode) -> str | None:
        """The team's text for ``reason`` in ``mode`` and ``locale``; ``None``: built-in."""
        classes = self.entries.get(mode)
        if not classes:
            return None
        chosen = classes.get(reason.value) or classes.get(family_of(reason).value)
        return None if chosen is None else chosen[locale]

    def texts(self) -> Iterable[tuple[str, str]]:
        """Every text with its dotted key (``guard.held_back.en``), in file order."""
        for mode, classes in self.entries.items():
            for name, by_locale in classes.items():
                for locale, text in by_locale.items():
                    yield f"{mode.value}.{name}.{locale.value}", text


def family_of(reason: ReasonCode) -> FallbackFamily:
    """The fallback family of ``reason``.

    Raises:
        UsageError: ``reason`` is ``approved``, which has no fallback.
    """
    try:
        return _FAMILIES[reason]
    except KeyError:
        raise UsageError(f"reason {reason!r} has no fallback") from None


def fallback_text(
    reason: ReasonCode,
    locale: Locale,
    *,
    mode: ReplyMode = ReplyMode.SUPPORT,
    texts: FallbackTexts | None = None,
) -> str:
    """The restricted reply for ``reason`` in ``locale`` (resources are added separately).

    Args:
        reason: why the fallback goes out.
        locale: its language.
        mode: whose draft was judged (``support`` by default).
        texts: the team's own wording; what it does not name is built-in.

    Raises:
        UsageError: ``reason`` is ``approved``.
    """
    family = family_of(reason)
    own = None if texts is None else texts.get(reason, locale, mode)
    return own if own is not None else _BUILTIN[mode][family][locale]


def fallback_source(
    reason: ReasonCode, mode: ReplyMode, texts: FallbackTexts | None
) -> FallbackSource:
    """Whether :func:`fallback_text` gives the team's text or the built-in one.

    Raises:
        UsageError: ``reason`` is ``approved``.
    """
    family_of(reason)
    own = None if texts is None else texts.get(reason, Locale.EN, mode)
    return "builtin" if own is None else "texts_file"


# --- the texts file ---------------------------------------------------------------------

_CLASSES: tuple[str, ...] = tuple(f.value for f in FallbackFamily) + tuple(
    r.value for r in ReasonCode if r.is_fallback
)


def _suggest(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for a close known word (case aside), else ``''``."""
    choices = {k.lower(): k for k in known}
    close = difflib.get_close_matches(word.lower(), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {choices[close[0]]!r}?)" if close else ""


def _kind(value: object) -> str:
    names = {
        str: "a string",
        dict: "a table",
        list: "an array",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }
    return names.get(type(value), f"a {type(value).__name__}")


def parse_fallback_texts(data: Mapping[str, Any], *, source: str | None = None) -> FallbackTexts:
    """The structure of a texts file's ``data`` (its TOML, parsed), checked strictly.

    Tables by mode (``support``, ``guard``), then by reason class (a family:
    ``held_back``, ``cannot_judge``, ``unavailable``, ``prohibited``; or a fallback
    reason code: ``rejected``, ``budget_exhausted``...), then by locale (``en``,
    ``zh-Hans``, ``zh-Hant``, every one required). No other key; every text a string
    with visible characters. The rules are not run here (:func:`load_fallback_texts`).

    Raises:
        ConfigError: one problem per key at fault, each naming it (with the key meant,
            when a known one is close).
    """
    where = "gate.texts_file" if source is None else f"texts file {source!r}"
    problems: list[str] = []
    entries: dict[ReplyMode, dict[str, Mapping[Locale, str]]] = {}
    modes = [m.value for m in ReplyMode]
    locales = [loc.value for loc in Locale]
    for mode_key, classes in data.items():
        if mode_key not in modes:
            hint = _suggest(mode_key, modes)
            problems.append(
                f"{where}: unknown mode {mode_key!r}{hint}; modes are {', '.join(modes)}"
            )
            continue
        if not isinstance(classes, Mapping):
            problems.append(
                f"{where}: {mode_key} must be a table of reason classes, not {_kind(classes)}"
            )
            continue
        mode = ReplyMode(mode_key)
        found: dict[str, Mapping[Locale, str]] = {}
        for class_key, by_locale in classes.items():
            key = f"{mode_key}.{class_key}"
            if class_key not in _CLASSES:
                hint = _suggest(class_key, _CLASSES)
                problems.append(
                    f"{where}: {key}: unknown reason class {class_key!r}{hint}; classes are "
                    f"the families {', '.join(f.value for f in FallbackFamily)} or a fallback "
                    "reason code"
                )
                continue
            if not isinstance(by_locale, Mapping):
                problems.append(
                    f"{where}: {key} must be a table of locales, not {_kind(by_locale)}"
                )
                continue
            texts: dict[Locale, str] = {}
            for locale_key, text in by_locale.items():
                if locale_key not in locales:
                    hint = _suggest(locale_key, locales)
                    problems.append(
                        f"{where}: {key}: unknown locale {locale_key!r}{hint}; locales are "
                        f"{', '.join(locales)}"
                    )
                elif not isinstance(text, str):
                    problems.append(
                        f"{where}: {key}.{locale_key} must be a string, not {_kind(text)}"
                    )
                elif not text.strip():
                    problems.append(f"{where}: {key}.{locale_key} is empty")
                else:
                    texts[Locale(locale_key)] = text
            missing = [loc for loc in locales if loc not in by_locale]
            if missing:
                problems.append(
                    f"{where}: {key} lacks {', '.join(missing)} (an entry gives every locale)"
                )
            found[class_key] = MappingProxyType(texts)
        entries[mode] = found
    if problems:
        raise ConfigError(problems)
    frozen = {mode: MappingProxyType(classes) for mode, classes in entries.items()}
    return FallbackTexts(MappingProxyType(frozen), source)


_PHONE_RULE = "unverified_resource"


def _rule_problems(
    texts: FallbackTexts,
    *,
    where: str,
    catalogue: RuleCatalogue,
    gate: GateConfig,
    registry: ResourceRegistry,
) -> list[str]:
    """Each text the rules in force refuse, naming its entry and the rule.

    Checked as a draft to a user of ``gate.region`` is; and since a fallback may go to a
    user of any region, the phone rule runs again for every region the registry serves:
    a number shown to everyone is one no code rendered for them.
    """
    context = RuleContext.of_gate(gate, region=gate.region, registry=registry)
    phone = catalogue.get(_PHONE_RULE)
    phones = RuleCatalogue((phone,)) if phone is not None and phone.checked_in_code else None
    regions = sorted(set(registry.regions) - {gate.region})
    problems: list[str] = []
    for key, text in texts.texts():
        findings = [(f.rule, f.note) for f in catalogue.check(text, context)]
        if phones is not None and not any(rule == _PHONE_RULE for rule, _ in findings):
            for region in regions:
                there = RuleContext.of_gate(gate, region=region, registry=registry)
                found = phones.check(text, there)
                if found:
                    note = f"{found[0].note}: a fallback may reach a user of any region"
                    findings.append((_PHONE_RULE, note))
                    break
        seen: set[str] = set()
        for rule, note in findings:
            if rule in seen:
                continue
            seen.add(rule)
            problems.append(
                f"{where}: {key} breaks rule {rule} ({note}); a fallback text is checked "
                "by the rules a draft meets"
            )
    return problems


def load_fallback_texts(
    path: str | Path,
    *,
    gate: GateConfig,
    catalogue: RuleCatalogue,
    registry: ResourceRegistry | None = None,
) -> FallbackTexts:
    """Read a texts file, check its structure, then check every text by the rules.

    Args:
        path: the TOML file (``[gate] texts_file``).
        gate: the ``[gate]`` section: the limits and region the rules check against.
        catalogue: the rules in force (those a draft meets).
        registry: the crisis-resource registry (the packaged one by default).

    Raises:
        ConfigError: the file is missing, unreadable or not TOML; a key is unknown, a
            locale missing, a text empty (:func:`parse_fallback_texts`); or a rule
            checked in code refuses a text, naming its entry and the rule.
    """
    source = str(path)
    where = f"texts file {source!r}"
    raw = read_text_file(path, "texts file")
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{where} is not valid TOML: {exc}"]) from None
    texts = parse_fallback_texts(data, source=source)
    problems = _rule_problems(
        texts,
        where=where,
        catalogue=catalogue,
        gate=gate,
        registry=registry or default_registry(),
    )
    if problems:
        raise ConfigError(problems)
    return texts


def configured_texts(config: Config) -> FallbackTexts | None:
    """The texts ``[gate] texts_file`` configures, checked as at start-up; ``None``: unset.

    The rules are the catalogue the gate would build (entry points and ``[gate]
    extra_rules``), the registry the one ``[risk] resources_file`` configures.

    Raises:
        ConfigError: the file or a text in it is refused (:func:`load_fallback_texts`),
            or the rules or the registry cannot be built.
    """
    if config.gate.texts_file is None:
        return None
    registry = configured_registry(config.risk)
    return load_fallback_texts(
        config.gate.texts_file,
        gate=config.gate,
        catalogue=RuleCatalogue.from_config(config.gate),
        registry=registry,
    )
