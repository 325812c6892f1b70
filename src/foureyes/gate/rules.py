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
expressions that make an extra rule checked in code too.

A candidate's tool calls (:mod:`foureyes.gate.candidate`) are candidate text too. Every
check runs on the reply's text and again on each call's *view* (:func:`tool_call_view`:
the name, then one ``path: value`` line per value of the arguments), so a made-up
hotline or an instruction to the reviewer in an argument breaks the rule it breaks in
the text; such a finding names its call (``RuleFinding.tool_call``) and its span indexes
that call's view. A value that is only a phone number is an address the app acts on,
not text shown to anyone, and the phone rule leaves it alone; a number inside a value's
text is checked. ``empty_text`` and ``too_long`` are about the reply's text only.

Rule :data:`TOOL_RULE` (reason ``tool_not_allowed``) judges what is called. Names
compare folded (:func:`foureyes.core.fold.tool_name_key`: case, ``_``/``-``, width and
invisible characters do not matter) against ``gate.tools_deny`` and a non-empty
``gate.tools_allow``; when the request declared its tools (guard mode), a call must name
one of them exactly, so an undeclared ``Delete_Account`` or a look-alike of a declared
name is refused; while the policy is ``restricted`` only ``gate.tools_when_restricted``
may be called. A call written into the text (``<tool_call>{...}</tool_call>``,
``<function=name>``, a JSON object with a ``name`` and ``arguments`` or ``parameters``,
``{"tool_calls": [...]}``) is held to the same lists, and is refused outright when the
request declared tools (its calls belong in ``tool_calls``). A candidate of tool calls
only is not empty. Everything here is pure.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

from foureyes import plugins
from foureyes.config import GateConfig
from foureyes.core.errors import ConfigError
from foureyes.core.fold import Normalised, normalise, tool_name_key
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
    "tool_call_view",
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
    tool_call: int | None = None
    """The tool call it was found in (its index), whose view (:func:`tool_call_view`)
    ``span`` indexes; ``None``: in the reply's text."""

    def as_json(self) -> dict[str, Any]:
        """The finding as recorded in the trace (``tool_call`` only when in a call)."""
        found: dict[str, Any] = {"rule": self.rule, "span": list(self.span), "note": self.note}
        if self.tool_call is not None:
            found["tool_call"] = self.tool_call
        return found


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
    tools_declared: frozenset[str] | None = None
    """The tool names the request declared (guard mode's ``tools``), a call must name one
    exactly; ``None``: the request declared none that we know of (a given draft)."""
    restricted: bool = False
    """Whether the reply's policy is ``restricted``: only ``tools_when_restricted`` then."""
    tools_when_restricted: frozenset[str] = frozenset()
    """Tool names a candidate may call while ``restricted``."""

    @classmethod
    def of_gate(
        cls,
        gate: GateConfig,
        *,
        region: str | None,
        registry: ResourceRegistry | None,
        tools_declared: Iterable[str] | None = None,
    ) -> RuleContext:
        """The context ``[gate]`` sets for a reply to a user in ``region``."""
        return cls(
            max_chars=gate.max_chars,
            region=region,
            registry=registry,
            tools_allow=frozenset(gate.tools_allow),
            tools_deny=frozenset(gate.tools_deny),
            tools_declared=None if tools_declared is None else frozenset(tools_declared),
            tools_when_restricted=frozenset(gate.tools_when_restricted),
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
    """The candidate's tool calls (:mod:`foureyes.gate.candidate`), in order; empty in a
    call's own input (its view is the text)."""
    tool_call: int | None = None
    """``None``: ``text`` is the reply's text. Else the index of the call whose view
    (:func:`tool_call_view`) ``text`` is."""
    values: tuple[tuple[int, int], ...] = ()
    """In a call's view, the span of each value (after its ``path: ``)."""

    @classmethod
    def of(
        cls, text: str, context: RuleContext, tool_calls: tuple[ToolCall, ...] = ()
    ) -> RuleInput:
        """The input of ``text`` (and ``tool_calls``), folded."""
        return cls(text, normalise(text), context, tool_calls)

    @classmethod
    def of_call(
        cls, index: int, context: RuleContext, tool_calls: tuple[ToolCall, ...]
    ) -> RuleInput:
        """The input of call ``index``'s view, folded."""
        view, values = _view(tool_calls[index])
        # The call is this input's text: a check reading ``tool_calls`` reads them once,
        # in the reply's input.
        return cls(view, normalise(view), context, (), index, values)


def tool_call_view(call: ToolCall) -> str:
    """A tool call as the rules read it: its name, then a ``path: value`` line per value.

    Paths join object keys with ``.`` and array positions as ``[n]``; a string is
    shown as it is, any other value as JSON (``true``, ``12``, ``null``), an empty object
    or array as ``{}`` or ``[]``. Spans of findings in a call index this text.
    """
    return _view(call)[0]


def _view(call: ToolCall) -> tuple[str, tuple[tuple[int, int], ...]]:
    parts = [call.name]
    values: list[tuple[int, int]] = []
    at = len(call.name)

    def leaf(path: str, value: str) -> None:
        nonlocal at
        start = at + 1 + len(path) + 2
        parts.append(f"{path}: {value}")
        values.append((start, start + len(value)))
        at = start + len(value)

    def walk(path: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key, item in value.items():
                walk(f"{path}.{key}" if path else str(key), item)
        elif isinstance(value, list) and value:
            for n, item in enumerate(value):
                walk(f"{path}[{n}]", item)
        elif isinstance(value, str):
            leaf(path, value)
        else:
            leaf(path, json.dumps(value, ensure_ascii=False))

    walk("", call.arguments)
    return "\n".join(parts), tuple(values)


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
    if (
        candidate.tool_call is None
        and not candidate.folded.text.strip()
        and not candidate.tool_calls
    ):
        span = (0, len(candidate.text))
        yield RuleFinding("empty_text", span, "the reply has no visible text")


def _too_long(candidate: RuleInput) -> Iterator[RuleFinding]:
    length, limit = len(candidate.text), candidate.context.max_chars
    if candidate.tool_call is None and length > limit:
        note = f"{length} characters, at most {limit} allowed"
        yield RuleFinding("too_long", (limit, length), note)


def _unverified(candidate: RuleInput) -> Iterator[RuleFinding]:
    ctx = candidate.context
    where = ctx.region or "any region"
    # A value that is only a number is an address (whom an SMS goes to), not a resource
    # shown to anyone; a number written inside a value's text is one.
    for m in unverified_numbers(candidate.text, region=ctx.region, registry=ctx.registry):
        if _only_number(candidate, m.start, m.end):
            continue
        note = f"number {m.text!r} is not in the verified registry for {where}"
        yield RuleFinding("unverified_resource", (m.start, m.end), note)


def _only_number(candidate: RuleInput, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is in a call's name, or all of one of its values.

    A value counts as only a number when blanks, ``+`` and ``()`` are all else it holds.
    """
    text = candidate.text
    if candidate.tool_call is not None and start < len(text.partition("\n")[0]):
        return True
    return any(
        low <= start <= end <= high
        and not text[low:start].strip(" \t+(")
        and not text[end:high].strip(" \t)")
        for low, high in candidate.values
    )


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
    # Judged once, from the reply's input: each call's finding names the call and spans
    # its name (the first line of its view); a call written as text spans that text.
    if candidate.tool_call is not None:
        return
    ctx = candidate.context
    for index, call in enumerate(candidate.tool_calls):
        why = _tool_refusal(ctx, call.name, declared_exactly=True)
        if why is not None:
            note = f"tool call {index} calls {call.name!r}, {why}"
            yield RuleFinding(TOOL_RULE, (0, len(call.name)), note, tool_call=index)
    for start, end, name in _text_calls(candidate.text):
        if ctx.tools_declared is not None:
            why = "which the request declared as a tool: a call belongs in tool_calls"
        else:
            why = _tool_refusal(ctx, name, declared_exactly=False)
        if why is not None:
            shown = "an unnamed tool" if name is None else repr(name)
            yield RuleFinding(TOOL_RULE, (start, end), f"the text calls {shown}, {why}")


def _tool_refusal(ctx: RuleContext, name: str | None, *, declared_exactly: bool) -> str | None:
    """Why a call to ``name`` (``None``: unnamed) is not allowed here, or ``None``."""
    key = "" if name is None else tool_name_key(name)
    if key and key in {tool_name_key(denied) for denied in ctx.tools_deny}:
        return "which gate.tools_deny names"
    if ctx.tools_allow and key not in {tool_name_key(allowed) for allowed in ctx.tools_allow}:
        return "which gate.tools_allow does not name"
    if ctx.restricted and key not in {tool_name_key(t) for t in ctx.tools_when_restricted}:
        return "and the policy is restricted (gate.tools_when_restricted does not name it)"
    if declared_exactly and ctx.tools_declared is not None and name not in ctx.tools_declared:
        like = sorted(t for t in ctx.tools_declared if tool_name_key(t) == key)
        if like:
            return f"which only looks like the declared {like[0]!r}"
        return "which the request did not declare"
    return None


# Tool calls as models write them into text when they do not use the API's field: Hermes
# and Qwen's <tool_call>, Llama's <function=name>, Mistral's [TOOL_CALLS], and JSON with a
# name beside its arguments (bare, fenced, or in a "tool_calls" list).
_TEXT_CALL_HINT = re.compile(
    r"<\s*/?\s*tool_call\s*>|<\s*function\s*=|\[TOOL_CALLS\]|<\|python_tag\|>"
    r"|\"(?:arguments|parameters|tool_calls)\"\s*:",
    re.IGNORECASE,
)
_FUNCTION_TAG = re.compile(r"<\s*function\s*=\s*([^>\s]{1,128})\s*>", re.IGNORECASE)
_TOOL_CALL_TAG = re.compile(r"(?:<\s*tool_call\s*>|\[TOOL_CALLS\]|<\|python_tag\|>)", re.IGNORECASE)
_JSON_NAME = re.compile(r"\"name\"\s*:\s*\"((?:[^\"\\]|\\.){1,128})\"")
_JSON_ARGUMENTS = re.compile(r"\"(?:arguments|parameters)\"\s*:", re.IGNORECASE)
_NEAR = 2000
"""How far from a JSON ``name`` its ``arguments`` may be and still be one call."""


def _text_calls(text: str) -> Iterator[tuple[int, int, str | None]]:
    """Each tool call written into ``text``: its span and name (``None`` when unnamed).

    Read on :func:`neutralise`'s view (look-alike brackets as ‹ ›, one for one), so
    full-width or angle-quote forms of the tags are found too.
    """
    view = neutralise(text).replace("‹", "<").replace("›", ">")
    if not _TEXT_CALL_HINT.search(view):
        return
    named: set[int] = set()
    for found in _FUNCTION_TAG.finditer(view):
        named.add(found.start())
        yield found.start(), found.end(), found.group(1)
    for found in _JSON_NAME.finditer(view):
        window = view[max(0, found.start() - _NEAR) : found.end() + _NEAR]
        if _JSON_ARGUMENTS.search(window):
            named.add(found.start())
            try:
                name = json.loads(f'"{found.group(1)}"')
            except ValueError:
                name = found.group(1)
            yield found.start(), found.end(), name
    if not named:
        for found in _TOOL_CALL_TAG.finditer(view):
            yield found.start(), found.end(), None


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
        over the whole text: a check that cannot say "clean" has not said it. Every check
        runs again on each call's view (:func:`tool_call_view`); those findings name
        their call and index its view.
        """
        parts = [RuleInput.of(text, ctx, tool_calls)]
        parts += [RuleInput.of_call(n, ctx, tool_calls) for n in range(len(tool_calls))]
        found: list[RuleFinding] = []
        for candidate in parts:
            for rule in self.rules:
                if rule.check is not None:
                    found.extend(_run_check(rule, rule.check, candidate))
        return tuple(
            sorted(found, key=lambda f: (f.tool_call is not None, f.tool_call or 0, f.span, f.rule))
        )


def _run_check(rule: Rule, check: RuleCheck, candidate: RuleInput) -> list[RuleFinding]:
    """The findings of one check, or one finding over the whole text if it misbehaves."""
    whole, call = (0, len(candidate.text)), candidate.tool_call
    try:
        findings = list(check(candidate))
    # A plugin's check is third-party code: whatever it raises, the candidate is not
    # known to be clean, so the rule fires and the reply falls back (DESIGN 4.4).
    except Exception as exc:
        note = f"the check failed ({type(exc).__name__})"
        return [RuleFinding(rule.id, whole, note, tool_call=call)]
    if not all(_is_finding_of(rule, f, candidate) for f in findings):
        return [RuleFinding(rule.id, whole, "the check returned an invalid finding", call)]
    # A plugin's finding in a call's view names that call even if the plugin did not.
    return [f if f.tool_call is not None else _in_call(f, call) for f in findings]


def _in_call(finding: RuleFinding, call: int | None) -> RuleFinding:
    if call is None:
        return finding
    return RuleFinding(finding.rule, finding.span, finding.note, tool_call=call)


def _is_finding_of(rule: Rule, finding: object, candidate: RuleInput) -> bool:
    """Whether ``finding`` is a finding of ``rule`` whose span lies inside what it names.

    A finding that names a call spans that call's view (the reply's input may name any
    call, as :data:`TOOL_RULE` does; a call's input only its own); else the text.
    """
    if not isinstance(finding, RuleFinding) or finding.rule != rule.id:
        return False
    call = finding.tool_call
    if call is None:
        length = len(candidate.text)
    elif (
        candidate.tool_call is None and type(call) is int and 0 <= call < len(candidate.tool_calls)
    ):
        length = len(tool_call_view(candidate.tool_calls[call]))
    elif call == candidate.tool_call:
        length = len(candidate.text)
    else:
        return False
    span = finding.span
    return (
        isinstance(span, tuple)
        and len(span) == 2
        and all(type(i) is int for i in span)
        and 0 <= span[0] <= span[1] <= length
    )
