"""The rules catalogue, and the rules code checks on every candidate whatever the Supervisor says.

A rule has an id the Supervisor cites in a verdict's violations and a description in every
locale. Some rules are also *checked in code*: deterministic checks that run on every
candidate before review, so a reply with an unverified crisis number, a diagnosis, a
therapy claim or a guarantee never goes out even if the Supervisor approves it. A hit is
a fallback with reason ``rule_violation``.

The checks see the candidate twice: as written, and folded the way the L0 gate folds a
message (:func:`foureyes.core.fold.normalise`: invisible and format characters removed,
compatibility forms and case folded, separators and spacing tricks undone). A pattern that
matches either view fires, and a finding in the folded view is reported with the span of
the candidate it came from, so ``ig\u200bnore all rules`` or ``ＩＧＮＯＲＥ all rules`` is the
phrase it spells and a reply of zero-width characters only is empty. Phone numbers are
found in their own digit fold (:func:`foureyes.risk.resources.find_phone_numbers`).

A rule is registered by entry point in the ``foureyes.rules`` group (:mod:`foureyes.plugins`):
the built-ins (:data:`BUILTIN_RULES`) by foureyes' own ``pyproject.toml``, others by any
installed distribution, each a :class:`Rule` whose ``check`` (if any) is a pure synchronous
function of one :class:`RuleInput` returning :class:`RuleFinding` s. Config adds more:
``[gate.extra_rules]`` adds ids with descriptions, ``[gate.rule_patterns]`` adds regular
expressions that make an extra rule checked in code too. A candidate's tool calls
(:mod:`foureyes.gate.candidate`) are checked by name against ``gate.tools_deny`` and a
non-empty ``gate.tools_allow`` (rule :data:`TOOL_RULE`, reason ``tool_not_allowed``); a
candidate of tool calls only is not empty. Everything here is pure.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

from foureyes import plugins
from foureyes.config import GateConfig
from foureyes.core.errors import ConfigError
from foureyes.core.fold import Normalised, normalise
from foureyes.core.locale import Locale
from foureyes.gate import _patterns
from foureyes.gate._scan import fast_scanner
from foureyes.gate.candidate import ToolCall
from foureyes.llm.prompting import neutralise
from foureyes.risk.resources import ResourceRegistry, unverified_numbers

__all__ = [
    "BUILTIN_RULES",
    "Rule",
    "RuleCatalogue",
    "RuleCheck",
    "RuleContext",
    "RuleFinding",
    "RuleInput",
    "TOOL_RULE",
    "registered_rules",
]

TOOL_RULE = "tool_not_allowed"
"""The rule a call to a tool outside ``gate.tools_allow`` or in ``gate.tools_deny`` breaks."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of the catalogue; a plugin registers one per ``foureyes.rules`` entry point."""

    id: str
    """What verdicts and findings cite, e.g. ``diagnosis_claim`` (``[a-z][a-z0-9_]*``)."""
    description: Mapping[Locale, str]
    """What the rule forbids, in every locale (zh-Hans, zh-Hant, en)."""
    check: RuleCheck | None = None
    """The check code runs on every candidate; ``None``: only the Supervisor judges it."""

    @property
    def checked_in_code(self) -> bool:
        """Whether code checks it on every candidate (besides the Supervisor)."""
        return self.check is not None


@dataclass(frozen=True, slots=True)
class RuleFinding:
    """A rule that code found broken in a candidate."""

    rule: str
    """The rule's id."""
    span: tuple[int, int]
    """Character offsets ``[start, end)`` into the candidate."""
    note: str
    """What was found, without quoting the candidate beyond a phone number."""

    def as_json(self) -> dict[str, Any]:
        """The finding as recorded in the trace."""
        return {"rule": self.rule, "span": list(self.span), "note": self.note}


@dataclass(frozen=True, slots=True)
class RuleContext:
    """What the checks need besides the candidate."""

    max_chars: int
    """Longest candidate allowed."""
    region: str | None
    """The user's region; numbers must be in the registry for it (any region if ``None``)."""
    registry: ResourceRegistry | None = None
    """The crisis-resource registry; the packaged one when ``None``."""
    tools_allow: frozenset[str] = frozenset()
    """Tool names a candidate may call; empty: any not in ``tools_deny``."""
    tools_deny: frozenset[str] = frozenset()
    """Tool names a candidate may never call."""

    @classmethod
    def of_gate(
        cls, gate: GateConfig, *, region: str | None, registry: ResourceRegistry | None
    ) -> RuleContext:
        """The context ``[gate]`` sets for a reply to a user in ``region``."""
        return cls(
            max_chars=gate.max_chars,
            region=region,
            registry=registry,
            tools_allow=frozenset(gate.tools_allow),
            tools_deny=frozenset(gate.tools_deny),
        )


@dataclass(frozen=True, slots=True)
class RuleInput:
    """What a check reads: the candidate, folded once for every check, and its context.

    One frozen object, so that fields can be added (the candidate's tool calls, say)
    without changing any check's signature; a check reads only what it needs.
    """

    text: str
    """The candidate as written; findings' spans index it."""
    folded: Normalised
    """Its keyword fold (:func:`foureyes.core.fold.normalise`), with the map back to ``text``."""
    context: RuleContext
    """The limits, region and crisis-resource registry of this reply."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The candidate's tool calls (:mod:`foureyes.gate.candidate`), in order."""

    @classmethod
    def of(
        cls, text: str, context: RuleContext, tool_calls: tuple[ToolCall, ...] = ()
    ) -> RuleInput:
        """The input of ``text`` (and ``tool_calls``), folded."""
        return cls(text, normalise(text), context, tool_calls)


RuleCheck: TypeAlias = Callable[[RuleInput], Iterable[RuleFinding]]
"""A rule checked in code: pure and synchronous, every finding of its rule in the input.

Each finding cites the rule's own id and a span inside ``RuleInput.text``.
"""


def _text(en: str, hans: str, hant: str) -> Mapping[Locale, str]:
    return MappingProxyType({Locale.EN: en, Locale.ZH_HANS: hans, Locale.ZH_HANT: hant})


def _matches(
    rule: str,
    pattern: re.Pattern[str],
    candidate: RuleInput,
    note: str,
    view: Callable[[str], str] = str,
) -> Iterator[RuleFinding]:
    """A finding for every match of ``pattern`` in either view, spans in the candidate.

    ``view`` rewrites both views one for one before matching (spans stay valid). An empty
    match in the folded view has no characters to map back; the candidate as written has
    one at the same place.
    """
    scanner = fast_scanner(pattern)
    written = view(candidate.text)
    spans = {found.span() for found in scanner.finditer(written)}
    folded = candidate.folded
    folded_view = view(folded.text)
    if not _same_matches(pattern, written, folded_view, identity=not folded.maps):
        spans.update(
            folded.covering_span(*found.span())
            for found in scanner.finditer(folded_view)
            if found.end() > found.start()
        )
    for span in sorted(spans):
        yield RuleFinding(rule, span, note)


# An inline group that turns case-insensitive matching off again, as in ``(?-i:...)``.
_CASE_SENSITIVE_GROUP = re.compile(r"\(\?[a-zA-Z]*-[a-zA-Z]*i")


@functools.lru_cache(maxsize=256)
def _case_blind(pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` matches without regard to case throughout."""
    return bool(pattern.flags & re.IGNORECASE) and not _CASE_SENSITIVE_GROUP.search(pattern.pattern)


def _same_matches(pattern: re.Pattern[str], written: str, folded: str, *, identity: bool) -> bool:
    """Whether scanning the folded view could find nothing the written view has not.

    So when the fold changed nothing, or only the case of ASCII letters (one for one) and
    the pattern ignores case: each position then matches exactly as in the written view,
    whose spans are the folded spans too. Any other difference is scanned.
    """
    if not identity:
        return False
    if folded == written:
        return True
    return _case_blind(pattern) and written.isascii() and folded == written.lower()


def _empty(candidate: RuleInput) -> Iterator[RuleFinding]:
    # The folded view has no invisible characters: zero-width spaces, bidi controls and
    # fillers (U+3164, U+2800) alone are an empty reply. A candidate of tool calls only
    # says what it does in its calls.
    if not candidate.folded.text.strip() and not candidate.tool_calls:
        span = (0, len(candidate.text))
        yield RuleFinding("empty_text", span, "the reply has no visible text")


def _too_long(candidate: RuleInput) -> Iterator[RuleFinding]:
    length, limit = len(candidate.text), candidate.context.max_chars
    if length > limit:
        note = f"{length} characters, at most {limit} allowed"
        yield RuleFinding("too_long", (limit, length), note)


def _unverified(candidate: RuleInput) -> Iterator[RuleFinding]:
    ctx = candidate.context
    where = ctx.region or "any region"
    for m in unverified_numbers(candidate.text, region=ctx.region, registry=ctx.registry):
        note = f"number {m.text!r} is not in the verified registry for {where}"
        yield RuleFinding("unverified_resource", (m.start, m.end), note)


def _manipulation(candidate: RuleInput) -> Iterator[RuleFinding]:
    # Look-alike brackets are folded too (one for one, so spans stay valid): a forged
    # delimiter in full-width or angle-quote forms is still a forged delimiter.
    yield from _matches(
        "reviewer_manipulation",
        _patterns.REVIEWER_MANIPULATION,
        candidate,
        "text addressed to the reviewer or the system",
        view=neutralise,
    )


def _tools(candidate: RuleInput) -> Iterator[RuleFinding]:
    # A tool call has no span in the text: the finding's span is empty, at its end.
    ctx, end = candidate.context, len(candidate.text)
    for index, call in enumerate(candidate.tool_calls):
        if call.name in ctx.tools_deny:
            note = f"tool call {index} calls {call.name!r}, which gate.tools_deny names"
        elif ctx.tools_allow and call.name not in ctx.tools_allow:
            note = f"tool call {index} calls {call.name!r}, which gate.tools_allow does not name"
        else:
            continue
        yield RuleFinding(TOOL_RULE, (end, end), note)


def _pattern_check(rule: str, patterns: Iterable[re.Pattern[str]], note: str) -> RuleCheck:
    compiled = tuple(patterns)

    def check(candidate: RuleInput) -> Iterator[RuleFinding]:
        for pattern in compiled:
            yield from _matches(rule, pattern, candidate, note)

    return check


EMPTY_TEXT = Rule(
    "empty_text", _text("The reply is empty.", "回复为空。", "回覆為空。"), check=_empty
)
TOO_LONG = Rule(
    "too_long",
    _text("The reply is longer than allowed.", "回复超过允许的长度。", "回覆超過允許的長度。"),
    check=_too_long,
)
UNVERIFIED_RESOURCE = Rule(
    "unverified_resource",
    _text(
        "Gives a phone number or hotline that is not in the verified crisis-resource "
        "registry for the user's region.",
        "给出了不在该地区已核实危机资源名录中的电话号码或热线。",
        "給出了不在該地區已核實危機資源名錄中的電話號碼或熱線。",
    ),
    check=_unverified,
)
DIAGNOSIS_CLAIM = Rule(
    "diagnosis_claim",
    _text(
        "Diagnoses the user or says they have a mental-health condition.",
        "对用户作出诊断，或断言用户患有某种心理疾病。",
        "對使用者作出診斷，或斷言使用者患有某種心理疾病。",
    ),
    check=_pattern_check("diagnosis_claim", [_patterns.DIAGNOSIS], "states a diagnosis"),
)
THERAPY_CLAIM = Rule(
    "therapy_claim",
    _text(
        "Claims to be a therapist or doctor, or that the conversation is treatment.",
        "自称是治疗师或医生，或声称这段对话就是治疗。",
        "自稱是治療師或醫生，或聲稱這段對話就是治療。",
    ),
    check=_pattern_check(
        "therapy_claim", [_patterns.THERAPY], "claims to be therapy or a clinician"
    ),
)
GUARANTEE_CLAIM = Rule(
    "guarantee_claim",
    _text("Promises or guarantees an outcome.", "对结果作出承诺或保证。", "對結果作出承諾或保證。"),
    check=_pattern_check("guarantee_claim", [_patterns.GUARANTEE], "promises an outcome"),
)
UNCONFIRMED_AS_FACT = Rule(
    "unconfirmed_as_fact",
    _text(
        "States something only the user believes, or guesses about other people, as "
        "established fact.",
        "把只是用户自己的看法或对他人的猜测当作既定事实来陈述。",
        "把只是使用者自己的看法或對他人的猜測當作既定事實來陳述。",
    ),
    check=_pattern_check(
        "unconfirmed_as_fact", [_patterns.UNCONFIRMED_AS_FACT], "states a belief as fact"
    ),
)
REVIEWER_MANIPULATION = Rule(
    "reviewer_manipulation",
    _text(
        "Contains text aimed at the reviewer or the system (instructions, delimiters, a "
        "verdict) instead of the user.",
        "包含针对审核者或系统（而非用户）的内容，如指令、分隔符或审核结论。",
        "包含針對審核者或系統（而非使用者）的內容，如指令、分隔符或審核結論。",
    ),
    check=_manipulation,
)
TOOL_NOT_ALLOWED = Rule(
    TOOL_RULE,
    _text(
        "Calls a tool the deployment does not allow.",
        "调用了部署不允许的工具。",
        "呼叫了部署不允許的工具。",
    ),
    check=_tools,
)
HARMFUL_CONTENT = Rule(
    "harmful_content",
    _text(
        "Gives information or encouragement that could lead to self-harm or harm to others.",
        "提供可能导致自我伤害或伤害他人的信息或鼓励。",
        "提供可能導致自我傷害或傷害他人的資訊或鼓勵。",
    ),
)
DISMISSIVE = Rule(
    "dismissive",
    _text(
        "Dismisses, minimises or judges the user's feelings.",
        "否定、轻视或评判用户的感受。",
        "否定、輕視或評判使用者的感受。",
    ),
)
UNSUPPORTED_CLAIM = Rule(
    "unsupported_claim",
    _text(
        "States facts that neither the conversation nor the given sources support.",
        "陈述了对话和所给资料都无法支持的事实。",
        "陳述了對話和所給資料都無法支持的事實。",
    ),
)

BUILTIN_RULES: tuple[Rule, ...] = (
    EMPTY_TEXT,
    TOO_LONG,
    UNVERIFIED_RESOURCE,
    DIAGNOSIS_CLAIM,
    THERAPY_CLAIM,
    GUARANTEE_CLAIM,
    UNCONFIRMED_AS_FACT,
    REVIEWER_MANIPULATION,
    TOOL_NOT_ALLOWED,
    HARMFUL_CONTENT,
    DISMISSIVE,
    UNSUPPORTED_CLAIM,
)
"""The rules foureyes ships, in catalogue order; each is a ``foureyes.rules`` entry point."""

_RULE_ID = re.compile(r"[a-z][a-z0-9_]{0,40}")


def registered_rules() -> tuple[plugins.Plugin[Rule], ...]:
    """Every rule registered by entry point: the built-ins in their order, then by id.

    Raises:
        ConfigError: an entry point cannot be loaded, is not a :class:`Rule` (or its id is
            not its name, a locale's description is missing, its check is not callable),
            or names a rule another distribution registers too, a built-in's id included.
    """
    order = {rule.id: n for n, rule in enumerate(BUILTIN_RULES)}
    found = plugins.load(plugins.RULES, _as_rule)
    return tuple(
        sorted(found, key=lambda p: (not p.builtin, order.get(p.name, len(order)), p.name))
    )


def _as_rule(name: str, obj: object) -> Rule:
    """``obj`` as the rule of entry point ``name``, or ``TypeError``/``ValueError`` why not."""
    if not isinstance(obj, Rule):
        raise TypeError(f"a {type(obj).__name__} is not a foureyes.gate.rules.Rule")
    if obj.id != name or not _RULE_ID.fullmatch(obj.id):
        raise ValueError(f"rule id {obj.id!r} must be the entry point's name, [a-z][a-z0-9_]*")
    missing = [
        loc.value
        for loc in Locale
        if not isinstance(text := obj.description.get(loc), str) or not text.strip()
    ]
    if missing:
        raise ValueError(f"rule {obj.id!r} has no description in {', '.join(missing)}")
    if obj.check is not None and not callable(obj.check):
        raise TypeError(f"rule {obj.id!r} has a check that is not callable")
    return obj


@dataclass(frozen=True, slots=True)
class RuleCatalogue:
    """The rules a deployment uses: the registered rules plus those its config adds.

    Build it with :meth:`from_config` (or :meth:`builtin`); :meth:`check` runs every rule
    that is checked in code.
    """

    rules: tuple[Rule, ...]
    """Every rule, registered ones first (built-ins first among them)."""

    @classmethod
    def builtin(cls) -> RuleCatalogue:
        """The built-in rules only, without reading any entry point."""
        return cls(BUILTIN_RULES)

    @classmethod
    def from_config(cls, gate: GateConfig) -> RuleCatalogue:
        """The registered rules plus ``gate.extra_rules``, checked by ``gate.rule_patterns``.

        Raises:
            ConfigError: an extra rule reuses a registered id, or a rule plugin is broken
                (:func:`registered_rules`).
        """
        registered = registered_rules()
        owners = {plugin.name: plugin.distribution for plugin in registered}
        clashes = sorted(set(gate.extra_rules) & set(owners))
        if clashes:
            raise ConfigError(
                [
                    f"gate.extra_rules.{rule} redefines a rule registered by {owners[rule]}"
                    for rule in clashes
                ]
            )
        extra = tuple(
            Rule(
                rule,
                MappingProxyType(dict(texts)),
                check=_pattern_check(
                    rule,
                    [re.compile(p) for p in gate.rule_patterns[rule]],
                    "matches a configured pattern",
                )
                if rule in gate.rule_patterns
                else None,
            )
            for rule, texts in sorted(gate.extra_rules.items())
        )
        return cls(tuple(plugin.obj for plugin in registered) + extra)

    @property
    def ids(self) -> frozenset[str]:
        """Every rule id a verdict may cite."""
        return frozenset(rule.id for rule in self.rules)

    def __contains__(self, rule: object) -> bool:
        return rule in self.ids

    def get(self, rule: str) -> Rule | None:
        """The rule with id ``rule``, or ``None``."""
        return next((r for r in self.rules if r.id == rule), None)

    def check(
        self, text: str, ctx: RuleContext, tool_calls: tuple[ToolCall, ...] = ()
    ) -> tuple[RuleFinding, ...]:
        """Every finding of the rules checked in code, ordered by position.

        Spans index ``text``; a match found only in its folded view covers the characters
        it was folded from (see the module docstring). A check that raises, or returns
        something other than findings of its own rule inside ``text``, breaks its rule
        over the whole text: a check that cannot say "clean" has not said it. A finding
        on a tool call has the empty span at the end of ``text``.
        """
        candidate = RuleInput.of(text, ctx, tool_calls)
        found: list[RuleFinding] = []
        for rule in self.rules:
            if rule.check is not None:
                found.extend(_run_check(rule, rule.check, candidate))
        return tuple(sorted(found, key=lambda f: (f.span, f.rule)))


def _run_check(rule: Rule, check: RuleCheck, candidate: RuleInput) -> list[RuleFinding]:
    """The findings of one check, or one finding over the whole text if it misbehaves."""
    whole = (0, len(candidate.text))
    try:
        findings = list(check(candidate))
    # A plugin's check is third-party code: whatever it raises, the candidate is not
    # known to be clean, so the rule fires and the reply falls back (DESIGN 4.4).
    except Exception as exc:
        return [RuleFinding(rule.id, whole, f"the check failed ({type(exc).__name__})")]
    if not all(_is_finding_of(rule, f, len(candidate.text)) for f in findings):
        return [RuleFinding(rule.id, whole, "the check returned an invalid finding")]
    return findings


def _is_finding_of(rule: Rule, finding: object, length: int) -> bool:
    """Whether ``finding`` is a finding of ``rule`` whose span lies inside the text."""
    if not isinstance(finding, RuleFinding) or finding.rule != rule.id:
        return False
    span = finding.span
    return (
        isinstance(span, tuple)
        and len(span) == 2
        and all(type(i) is int for i in span)
        and 0 <= span[0] <= span[1] <= length
    )
