"""Scenarios of ``foureyes simulate``: the schema, rule picking, replies and their wire form.

Everything here is pure (no I/O besides reading the scenario file), so the HTTP layer in
:mod:`foureyes.llm.simulate` only decides *when* to answer and with which status.
docs/simulate.md documents the format for users.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from foureyes import plugins
from foureyes.config import read_text_file, validation_problems
from foureyes.core.errors import ConfigError

__all__ = [
    "Fault",
    "MALFORMED_BODY",
    "PLACEHOLDERS",
    "Reply",
    "ReplyToolCall",
    "Rule",
    "RuleBook",
    "Scenario",
    "ToolCallSpec",
    "UnresolvedPlaceholder",
    "UsageSpec",
    "last_message_text",
    "load_scenario",
    "parse_scenario",
    "registered_rule_ids",
    "render_reply",
    "wire_chunks",
    "wire_completion",
]

PLACEHOLDERS = ("candidate_sha256", "model")
"""Names usable as ``{{name}}`` in a rule's content, reasoning and tool-call arguments."""

MALFORMED_BODY = '{"id": "chatcmpl-sim", "object": "chat.completion", "choices": [{"index": 0, '
"""What fault ``malformed_json`` sends: JSON cut off mid-object."""
_STREAM_PIECE_CHARS = 16
"""Characters per streamed delta; small, so short test replies still span several chunks."""

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_]*)\s*\}\}")
# A digest is 64 lowercase hex characters standing alone, not a slice of a longer hex run.
_DIGEST = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


class Fault(StrEnum):
    """A failure a rule injects instead of (or into) its reply."""

    DELAY = "delay"
    """Wait ``delay_s`` seconds, then answer normally."""
    HANG = "hang"
    """Never answer; the request stays open until the client gives up."""
    HTTP_401 = "http_401"
    """Answer HTTP 401 with an OpenAI-style ``invalid_api_key`` error."""
    HTTP_429 = "http_429"
    """Answer HTTP 429 with ``Retry-After`` (``retry_after_s``, default 1 s)."""
    HTTP_500 = "http_500"
    """Answer HTTP 500 with an OpenAI-style ``server_error``."""
    MALFORMED_JSON = "malformed_json"
    """Answer HTTP 200 whose body (or stream chunk) is not JSON."""
    TRUNCATED = "truncated"
    """Cut the content to its first half: ``finish_reason`` ``length``, or a stream that
    stops without a finish reason and without ``[DONE]``."""
    WRONG_DIGEST = "wrong_digest"
    """Replace every 64-hex digest in the reply with a different one."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ToolCallSpec(_Spec):
    """A tool call a rule replies with."""

    name: str = Field(min_length=1)
    """Function name."""
    arguments: str | dict[str, Any] = "{}"
    """Arguments: raw JSON text, or a table/object that is serialised to JSON."""
    id: str | None = None
    """Call id; default ``call_<request>_<position>``."""

    def arguments_text(self) -> str:
        """The arguments as the JSON text the model would have written."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


class UsageSpec(_Spec):
    """Token counts a rule reports instead of the simulator's estimate."""

    prompt_tokens: int = Field(ge=0)
    """Prompt tokens reported."""
    completion_tokens: int = Field(ge=0)
    """Completion tokens reported."""
    reasoning_tokens: int | None = Field(default=None, ge=0)
    """Reported as ``completion_tokens_details.reasoning_tokens``; left out when unset."""
    cached_tokens: int | None = Field(default=None, ge=0)
    """Reported as ``prompt_tokens_details.cached_tokens`` (OpenAI's field); left out when
    unset."""
    prompt_cache_hit_tokens: int | None = Field(default=None, ge=0)
    """Reported as ``prompt_cache_hit_tokens`` (DeepSeek's field); left out when unset."""


class Rule(_Spec):
    """One scripted answer of a model, eligible while its ``match`` and ``times`` allow."""

    name: str | None = None
    """Label shown in the request log; defaults to the rule's position."""
    match: re.Pattern[str] | None = None
    """Regex searched (``re.search``) in the last message's text; ``None`` matches all."""
    match_scope: Literal["last", "request"] = "last"
    """Where ``match`` is searched: the last message's text, or every message's text of the
    request joined by line breaks in order (so one regex can require an earlier message
    and a later one: ``(?s)task.*review``)."""
    times: int | None = Field(default=None, ge=1)
    """How many requests the rule may answer; ``None`` for no limit."""
    content: str | None = None
    """Visible reply text (placeholders allowed)."""
    reasoning_content: str | None = None
    """DeepSeek-style reasoning sent alongside (placeholders allowed)."""
    tool_calls: tuple[ToolCallSpec, ...] = ()
    """Tool calls of the reply."""
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"] | None = None
    """Finish reason; default ``tool_calls`` when there are tool calls, else ``stop``."""
    usage: UsageSpec | None = None
    """Reported usage; default an estimate of one token per four characters."""
    fault: Fault | None = None
    """The failure to inject, if any."""
    delay_s: float | None = Field(default=None, gt=0, le=3600)
    """Seconds to wait; required by, and only valid with, fault ``delay``."""
    retry_after_s: float | None = Field(default=None, ge=0, le=86400)
    """``Retry-After`` of fault ``http_429`` (default 1 s); only valid with it."""
    stream_interval_s: float = Field(default=0.0, ge=0, le=60)
    """Seconds between two chunks of a streamed answer, so a stream arrives paced as a
    model writes it (0: all at once); a plain answer ignores it."""

    @field_validator("match", mode="before")
    @classmethod
    def _compile(cls, value: Any) -> Any:
        # pydantic's own message does not say what is wrong with the pattern.
        if isinstance(value, str):
            try:
                return re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regex {value!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        if (self.fault is Fault.DELAY) != (self.delay_s is not None):
            raise ValueError("delay_s is required by, and only valid with, fault 'delay'")
        if self.retry_after_s is not None and self.fault is not Fault.HTTP_429:
            raise ValueError("retry_after_s is only valid with fault 'http_429'")
        unknown = sorted({n for text in self._templates() for n in _PLACEHOLDER.findall(text)})
        unknown = [n for n in unknown if n not in PLACEHOLDERS]
        if unknown:
            raise ValueError(
                f"unknown placeholder(s) {', '.join('{{' + n + '}}' for n in unknown)} "
                f"(known: {', '.join('{{' + n + '}}' for n in PLACEHOLDERS)})"
            )
        if self.fault is Fault.TRUNCATED and not self.content:
            raise ValueError("fault 'truncated' needs content to cut")
        if self.fault is Fault.WRONG_DIGEST and not any(
            _DIGEST.search(t) or "candidate_sha256" in _PLACEHOLDER.findall(t)
            for t in self._templates()
        ):
            raise ValueError(
                "fault 'wrong_digest' needs a 64-hex digest or {{candidate_sha256}} in the reply"
            )
        return self

    def _templates(self) -> list[str]:
        texts = [t for t in (self.content, self.reasoning_content) if t is not None]
        return texts + [call.arguments_text() for call in self.tool_calls]


class Scenario(_Spec):
    """A simulator script: per model name, the rules that answer its requests."""

    api_key: SecretStr | None = None
    """When set, requests must carry ``Authorization: Bearer <api_key>`` or get HTTP 401."""
    models: dict[str, tuple[Rule, ...]] = Field(min_length=1)
    """Rules by model name, tried in order for each request to that model."""
    extra_rule_ids: tuple[str, ...] = ()
    """Rule ids a scripted verdict may cite besides the registered rules (the
    ``foureyes.rules`` entry points): the deployment's ``[gate.extra_rules]``, or an id a
    test has the Supervisor cite on purpose to see the gate refuse it (``review_malformed``)."""

    @model_validator(mode="after")
    def _named_models(self) -> Scenario:
        if any(not name.strip() for name in self.models):
            raise ValueError("model names must not be empty")
        return self


def parse_scenario(data: Any, *, source: str = "scenario") -> Scenario:
    """Validate already decoded scenario data (a TOML or JSON document).

    A rule whose content is a Supervisor's verdict (a JSON object with ``candidate_sha256``
    and ``decision``, fenced or not) may cite only rule ids the gate knows: the registered
    rules and the scenario's ``extra_rule_ids``. The gate refuses a verdict citing any other
    id (``review_malformed``), so a scenario scripting one is refused here, when it loads.

    Raises:
        ConfigError: naming each unknown key, bad regex, unknown fault, inconsistent rule
            or rule id outside the catalogue (with the close ones and every known one),
            prefixed with ``source``; or the rule plugins cannot be loaded.
    """
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([f"{source}: {p}" for p in validation_problems(exc)]) from None
    cited = [
        (model, index, rule, rule_id)
        for model, rules in scenario.models.items()
        for index, rule in enumerate(rules)
        for rule_id in _cited_rule_ids(rule.content)
    ]
    if not cited:
        return scenario
    known = set(registered_rule_ids()) | set(scenario.extra_rule_ids)
    problems = [
        f"{source}: models.{model}.{index}"
        + (f" ({rule.name})" if rule.name else "")
        + f": the verdict cites rule {rule_id!r}, which is not in the rule catalogue"
        + _did_you_mean(rule_id, known)
        + f" (known: {', '.join(sorted(known))}); the gate would refuse it as"
        " review_malformed (an id the deployment adds goes in extra_rule_ids)"
        for model, index, rule, rule_id in cited
        if rule_id not in known
    ]
    if problems:
        raise ConfigError(problems)
    return scenario


def registered_rule_ids() -> tuple[str, ...]:
    """The ids of every registered rule (``foureyes.rules`` entry points), sorted.

    Raises:
        ConfigError: a rule entry point cannot be loaded or clashes with another
            (:func:`foureyes.plugins.load`).
    """
    return tuple(p.name for p in plugins.load(plugins.RULES, lambda _name, obj: obj))


_VERDICT_FENCE = re.compile(r"\A\s*```(?:json)?[ \t]*\n(.*)```\s*\Z", re.DOTALL | re.IGNORECASE)


def _cited_rule_ids(content: str | None) -> list[str]:
    """The rule ids a verdict in ``content`` cites; none when it is no verdict."""
    if content is None:
        return []
    fenced = _VERDICT_FENCE.match(content)
    try:
        data = json.loads(fenced.group(1) if fenced else content)
    except ValueError:
        return []
    if not isinstance(data, dict) or not {"candidate_sha256", "decision"} <= data.keys():
        return []
    violations = data.get("violations")
    if not isinstance(violations, list):
        return []
    return [v["rule"] for v in violations if isinstance(v, dict) and isinstance(v.get("rule"), str)]


def _did_you_mean(word: str, known: set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(known), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file: TOML when it ends in ``.toml``, otherwise JSON.

    Raises:
        ConfigError: the file is missing, unreadable, not TOML/JSON, or not a valid scenario.
    """
    file = Path(path)
    text = read_text_file(file, "scenario file")
    try:
        data: Any = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        kind = "TOML" if file.suffix == ".toml" else "JSON"
        raise ConfigError([f"scenario file {str(file)!r} is not valid {kind}: {exc}"]) from None
    return parse_scenario(data, source=str(file))


class RuleBook:
    """A scenario plus how often each rule has answered: picks the rule for each request.

    Use counts only grow; :meth:`reset` (or a new book) starts them again. Picking has no
    ``await`` in it, so concurrent requests in one event loop never share a use.
    """

    def __init__(self, scenario: Scenario) -> None:
        """Start with every rule unused."""
        self.scenario = scenario
        self._uses = {model: [0] * len(rules) for model, rules in scenario.models.items()}

    def knows(self, model: str) -> bool:
        """Whether the scenario has the model at all."""
        return model in self.scenario.models

    def pick(self, model: str, messages: Sequence[Any]) -> tuple[int, Rule] | None:
        """The first rule of ``model`` whose ``match`` fits and whose ``times`` is not used up.

        The chosen rule's use is counted. ``None`` when no rule is eligible; the caller
        answers with an error then, never with a made-up reply.
        """
        uses = self._uses[model]
        texts = {"last": last_message_text(messages)}
        for index, rule in enumerate(self.scenario.models[model]):
            if rule.times is not None and uses[index] >= rule.times:
                continue
            if rule.match is not None:
                if rule.match_scope not in texts:
                    texts[rule.match_scope] = request_text(messages)
                if rule.match.search(texts[rule.match_scope]) is None:
                    continue
            uses[index] += 1
            return index, rule
        return None

    def reset(self) -> None:
        """Forget every use."""
        for uses in self._uses.values():
            uses[:] = [0] * len(uses)


class UnresolvedPlaceholder(Exception):
    """A rule's placeholder found nothing to stand for in the request."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"placeholder {{{{{name}}}}} found no 64-hex digest in the request")


@dataclass(frozen=True, slots=True)
class ReplyToolCall:
    """A tool call as it goes on the wire."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Reply:
    """A rule made concrete for one request: placeholders filled, faults on the content applied."""

    content: str | None
    reasoning_content: str | None
    tool_calls: tuple[ReplyToolCall, ...]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    details: tuple[tuple[str, Any], ...] = ()
    """Extra usage fields reported as given (token details of a rule's ``usage``)."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def last_message_text(messages: Sequence[Any]) -> str:
    """The text of the last message (text parts joined; ``""`` when it has none)."""
    last = messages[-1] if messages else None
    return _text_of(last.get("content")) if isinstance(last, Mapping) else ""


def request_text(messages: Sequence[Any]) -> str:
    """Every message's text, in order, joined by line breaks (a rule's ``request`` scope)."""
    return "\n".join(_text_of(m.get("content")) for m in messages if isinstance(m, Mapping))


def _request_digest(messages: Sequence[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, Mapping):
            found = _DIGEST.search(_text_of(message.get("content")))
            if found:
                return found.group(0)
    return None


def _estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def render_reply(rule: Rule, *, model: str, messages: Sequence[Any], seq: int) -> Reply:
    """Make ``rule``'s reply for one request.

    Fills placeholders, then applies the content faults: ``wrong_digest`` swaps every
    digest for another, ``truncated`` keeps the first half of the content and finishes
    with ``length``.

    Raises:
        UnresolvedPlaceholder: ``{{candidate_sha256}}`` is used but the request's messages
            hold no 64-hex digest.
    """
    values: dict[str, str | None] = {"model": model, "candidate_sha256": None}

    def fill(text: str) -> str:
        def value(found: re.Match[str]) -> str:
            name = found.group(1)
            if name == "candidate_sha256" and values[name] is None:
                values[name] = _request_digest(messages)
            resolved = values[name]
            if resolved is None:
                raise UnresolvedPlaceholder(name)
            return resolved

        filled = _PLACEHOLDER.sub(value, text)
        if rule.fault is Fault.WRONG_DIGEST:
            filled = _DIGEST.sub(lambda d: hashlib.sha256(d.group(0).encode()).hexdigest(), filled)
        return filled

    content = fill(rule.content) if rule.content is not None else None
    reasoning = fill(rule.reasoning_content) if rule.reasoning_content is not None else None
    calls = tuple(
        ReplyToolCall(
            id=spec.id or f"call_{seq}_{i}", name=spec.name, arguments=fill(spec.arguments_text())
        )
        for i, spec in enumerate(rule.tool_calls)
    )
    finish = rule.finish_reason or ("tool_calls" if calls else "stop")
    if rule.fault is Fault.TRUNCATED and content is not None:
        content, calls, finish = content[: max(1, len(content) // 2)], (), "length"
    details: tuple[tuple[str, Any], ...] = ()
    if rule.usage is not None:
        prompt, completion = rule.usage.prompt_tokens, rule.usage.completion_tokens
        details = _usage_details(rule.usage)
    else:
        prompt = _estimate_tokens(sum(len(_text_of(m.get("content"))) for m in messages))
        written = (content or "") + (reasoning or "") + "".join(c.arguments for c in calls)
        completion = _estimate_tokens(len(written))
    return Reply(
        content=content,
        reasoning_content=reasoning,
        tool_calls=calls,
        finish_reason=finish,
        prompt_tokens=prompt,
        completion_tokens=completion,
        details=details,
    )


def _usage_details(spec: UsageSpec) -> tuple[tuple[str, Any], ...]:
    details: list[tuple[str, Any]] = []
    if spec.reasoning_tokens is not None:
        details.append(("completion_tokens_details", {"reasoning_tokens": spec.reasoning_tokens}))
    if spec.cached_tokens is not None:
        details.append(("prompt_tokens_details", {"cached_tokens": spec.cached_tokens}))
    if spec.prompt_cache_hit_tokens is not None:
        details.append(("prompt_cache_hit_tokens", spec.prompt_cache_hit_tokens))
    return tuple(details)


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        **dict(reply.details),
    }


def _envelope(kind: str, *, model: str, seq: int, created: int) -> dict[str, Any]:
    return {"id": f"chatcmpl-sim-{seq}", "object": kind, "created": created, "model": model}


def wire_completion(reply: Reply, *, model: str, seq: int, created: int) -> dict[str, Any]:
    """``reply`` as an OpenAI ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning_content is not None:
        message["reasoning_content"] = reply.reasoning_content
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.finish_reason,
    }
    envelope = _envelope("chat.completion", model=model, seq=seq, created=created)
    return {**envelope, "choices": [choice], "usage": _usage(reply)}


def _pieces(text: str | None) -> list[str]:
    text = text or ""
    return [text[i : i + _STREAM_PIECE_CHARS] for i in range(0, len(text), _STREAM_PIECE_CHARS)]


def wire_chunks(
    reply: Reply, *, model: str, seq: int, created: int, fault: Fault | None, include_usage: bool
) -> Iterator[dict[str, Any] | str]:
    """The ``data:`` payloads streaming ``reply``: chunk objects, then the text ``[DONE]``.

    Order: the role, reasoning deltas, content deltas, tool calls (an opening delta with id
    and name, then argument pieces), the finish reason, the usage chunk when asked, [DONE].
    ``malformed_json`` sends a payload that is not JSON (as text); ``truncated`` stops after
    the content, with neither finish reason nor [DONE].
    """
    envelope = _envelope("chat.completion.chunk", model=model, seq=seq, created=created)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**envelope, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    if fault is Fault.MALFORMED_JSON:
        yield MALFORMED_BODY
        yield "[DONE]"
        return
    for piece in _pieces(reply.reasoning_content):
        yield chunk({"reasoning_content": piece})
    for piece in _pieces(reply.content):
        yield chunk({"content": piece})
    if fault is Fault.TRUNCATED:
        return
    for i, call in enumerate(reply.tool_calls):
        function = {"name": call.name, "arguments": ""}
        yield chunk(
            {"tool_calls": [{"index": i, "id": call.id, "type": "function", "function": function}]}
        )
        for piece in _pieces(call.arguments):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {**envelope, "choices": [], "usage": _usage(reply)}
    yield "[DONE]"
