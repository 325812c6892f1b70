"""OpenAI Agents SDK guardrails built on :class:`foureyes.Guard` (docs/library.md).

::

    guard = await Guard.start(config)
    agent = Agent(
        name="support",
        input_guardrails=[triage_guardrail(guard)],
        output_guardrails=[check_guardrail(guard)],
        tools=[function_tool(book, tool_input_guardrails=[tool_call_guardrail(guard)])],
    )

- :func:`triage_guardrail` (an input guardrail) triages the user's message with
  :meth:`Guard.triage`; its tripwire fires when the policy is ``prohibited`` (a confirmed
  crisis: no free generation at all), the case where the agent must not answer; its
  ``output_info`` (a :class:`TriageInfo`) then carries the code-rendered crisis reply to
  show instead (``crisis_reply.text``, and the resources as entries). A ``restricted``
  policy does not trip it: the agent may answer, and the output guardrail's check adds the
  crisis resources (so that reply is not released as is).
- :func:`check_guardrail` (an output guardrail) checks the agent's final output as the draft
  of :meth:`Guard.check` against the run's input messages; its tripwire fires unless the
  output is released exactly as written, and its ``output_info`` carries what to deliver.
- :func:`tool_call_guardrail` (a tool input guardrail) refuses a function-tool call that the
  gate's rules refuse (``[gate] tools_allow`` / ``tools_deny``), with
  :meth:`Guard.check_tool_calls`, before the tool runs.

Each guardrail names its conversation with a :data:`ConversationOf` (by default
:func:`conversation_of_context`: the ``conversation_id`` of the run's context object, or
none, which gives each call a fresh conversation). The SDK is the ``agents`` extra
(``pip install 'foureyes[agents]'``); :mod:`foureyes` never imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from foureyes.integrations._extra import missing_extra

try:
    from agents import (
        Agent,
        GuardrailFunctionOutput,
        InputGuardrail,
        OutputGuardrail,
        RunContextWrapper,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
    )
except ImportError as exc:  # tests hide the SDK to reach this
    if exc.name is None or exc.name.split(".")[0] != "agents":
        raise
    raise missing_extra("agents", "the OpenAI Agents SDK", "agents", exc) from exc
from pydantic_core import PydanticSerializationError, to_json

from foureyes.core.errors import ContractError
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import CrisisReply, Outcome, ToolCallCheck
from foureyes.guard import INVALID_INPUT, Guard
from foureyes.pipeline import SupportOutcome
from foureyes.risk.result import TriageResult

__all__ = [
    "CheckInfo",
    "ConversationOf",
    "ToolCallInfo",
    "TriageInfo",
    "chat_messages",
    "check_guardrail",
    "conversation_of_context",
    "draft_text",
    "tool_call_guardrail",
    "triage_guardrail",
]

ConversationOf = Callable[[RunContextWrapper[Any]], str | None]
"""Names a run's conversation from its context wrapper; ``None``: a fresh one per call."""

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_ROLES = frozenset({"system", "developer", "user", "assistant"})


def conversation_of_context(wrapper: RunContextWrapper[Any]) -> str | None:
    """The default :data:`ConversationOf`: ``conversation_id`` of the run's context.

    The context given to ``Runner.run(..., context=...)`` may be a mapping with the key
    ``conversation_id`` or an object with that attribute (a non-empty string). Anything
    else is ``None``: each triage and check then runs in a conversation of its own, so
    no daily limit, trend or open unknown carries from one message to the next.
    """
    context = wrapper.context
    found = (
        context.get("conversation_id")
        if isinstance(context, Mapping)
        else getattr(context, "conversation_id", None)
    )
    return found if isinstance(found, str) and found else None


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") in _TEXT_PARTS
            and isinstance(part.get("text"), str)
        )
    return ""


def chat_messages(items: str | Sequence[Any]) -> list[dict[str, str]]:
    """The SDK's run input as foureyes' chat messages (``{"role", "content"}``).

    A string is one user message. From a list of input items, the messages of roles
    ``system``, ``developer``, ``user`` and ``assistant`` are kept with their text parts
    (``input_text``, ``output_text``) joined by newlines; tool calls, tool outputs,
    reasoning and messages without text are left out (the tool guardrail judges calls).
    """
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages = []
    for item in items:
        raw = item.model_dump() if hasattr(item, "model_dump") else item
        if not isinstance(raw, Mapping) or raw.get("type", "message") != "message":
            continue
        role, text = raw.get("role"), _text_of(raw.get("content"))
        if role in _ROLES and text.strip():
            messages.append({"role": str(role), "content": text})
    return messages


def draft_text(output: object) -> str:
    """The agent's final output as the text a check judges.

    A string is itself; structured output (a pydantic model, a dataclass, a mapping, a
    list, a number) is its JSON text, as pydantic serialises it.

    Raises:
        ContractError: the output is ``None``, bytes, or has no JSON form (``schema``
            ``agents.output``, ``reason`` ``invalid_input``).
    """
    if isinstance(output, str):
        return output
    kind = type(output).__name__
    if output is None or isinstance(output, bytes | bytearray):
        raise ContractError("agents.output", INVALID_INPUT, f"output: a {kind} is not a reply")
    try:
        return to_json(output).decode("utf-8")
    except PydanticSerializationError:
        raise ContractError(
            "agents.output", INVALID_INPUT, f"output: a {kind} has no JSON text"
        ) from None


@dataclass(frozen=True, slots=True)
class TriageInfo:
    """The ``output_info`` of :func:`triage_guardrail`."""

    risk: dict[str, Any]
    """``status``, ``level``, ``confirmed``, ``tier``: the gateway's ``foureyes.risk``."""
    policy: GenerationPolicy
    """What triage allows: ``prohibited`` trips the guardrail."""
    reason: ReasonCode | None
    """``generation_prohibited`` when tripped (the reason a check would fall back with);
    ``None`` otherwise."""
    trace_id: str | None
    """The recorded triage."""
    conversation_id: str
    """The conversation triaged in."""
    triage: TriageResult
    """The whole result."""
    crisis_reply: CrisisReply | None = None
    """When triage escalated (a policy other than ``normal``), the code-rendered crisis
    reply (:meth:`Guard.crisis_reply`): on the tripwire (``prohibited``) show its
    ``text``, which is what a check would deliver; its ``resources`` are the entries it
    lists. ``None`` under a ``normal`` policy."""


@dataclass(frozen=True, slots=True)
class CheckInfo:
    """The ``output_info`` of :func:`check_guardrail`: what to deliver instead when tripped."""

    decision: Outcome
    """``released`` or ``fallback``."""
    reason: ReasonCode
    """``approved``, or why the fallback went out."""
    released_as_is: bool
    """Whether the delivered text is the agent's output unchanged (else the tripwire)."""
    text: str
    """The text to deliver: the output, the output with crisis resources, or the fallback."""
    delivered_sha256: str
    """Digest of ``text``."""
    candidate_sha256: str | None
    """Digest of the released output; ``None`` for a fallback."""
    trace_id: str
    """The recorded check."""
    policy: GenerationPolicy
    """The policy applied."""
    risk: dict[str, Any]
    """The triage of the user's message (the gateway's ``foureyes.risk``)."""
    outcome: SupportOutcome
    """The whole outcome of :meth:`Guard.check`."""


@dataclass(frozen=True, slots=True)
class ToolCallInfo:
    """The ``output_info`` of :func:`tool_call_guardrail`."""

    tool: str
    """The function the model called."""
    allowed: bool
    """Whether the call may run."""
    reason: str | None
    """``tool_not_allowed`` or ``rule_violation`` (the gate's reasons), ``invalid_input``
    when the call's arguments are not strict JSON; ``None`` when allowed."""
    notes: tuple[str, ...]
    """What fired, as the gate's findings say it (no argument values)."""
    check: ToolCallCheck | None
    """The gate's check; ``None`` for a call it could not read."""


def _user_turn(messages: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    turns = [m for m in messages if m["role"] in ("user", "assistant")]
    if not turns or turns[-1]["role"] != "user":
        raise ContractError("triage", INVALID_INPUT, "input: the last message must be the user's")
    history = [{"role": m["role"], "text": m["content"]} for m in turns[:-1]]
    return turns[-1]["content"], history


def triage_guardrail(
    guard: Guard,
    *,
    conversation_of: ConversationOf = conversation_of_context,
    run_in_parallel: bool = False,
    region: str | None = None,
    locale: str | None = None,
    name: str = "foureyes_triage",
) -> InputGuardrail[Any]:
    """An input guardrail that triages the user's message (:meth:`Guard.triage`).

    The tripwire fires when the policy is ``prohibited`` (triage confirmed a crisis):
    the agent must not answer freely, and the host shows foureyes' crisis reply, the
    ``crisis_reply`` of the :class:`TriageInfo` (from the exception's
    ``guardrail_result.output.output_info``): the wording, then the resources rendered by
    code. Earlier user and assistant messages of the input are the triage's history.

    Args:
        guard: an open guard.
        conversation_of: names the conversation from the run's context.
        run_in_parallel: the SDK's option; ``False`` (the default here) triages before
            the agent's model sees the message or any tool runs. With ``True`` the
            output guardrail's check may start while this triage still runs in the
            same conversation; the check's own triage is then dropped when it needs L1
            (``concurrency_drop``: ``unknown``, so ``restricted``), and the output is
            not released as written: more restriction, never less.
        region: the user's region (ISO 3166-1 alpha-2) for the crisis resources;
            ``gate.region`` when unset.
        locale: ``en``, ``zh-Hans`` or ``zh-Hant`` for the crisis reply; the message's
            language when unset.
        name: the guardrail's name in the SDK's traces.

    Raises (from the run):
        ContractError: the input has no user message last.
    """

    async def foureyes_triage(
        wrapper: RunContextWrapper[Any], agent: Agent[Any], items: str | list[Any]
    ) -> GuardrailFunctionOutput:
        text, history = _user_turn(chat_messages(items))
        result = await guard.triage(text, conversation_id=conversation_of(wrapper), history=history)
        tripped = not result.policy.allows_generation
        escalated = result.policy is not GenerationPolicy.NORMAL
        crisis = guard.crisis_reply(locale or result.locale, region) if escalated else None
        info = TriageInfo(
            risk=result.risk_block(),
            policy=result.policy,
            reason=ReasonCode.GENERATION_PROHIBITED if tripped else None,
            trace_id=result.trace_id,
            conversation_id=result.conversation_id,
            triage=result,
            crisis_reply=crisis,
        )
        return GuardrailFunctionOutput(output_info=info, tripwire_triggered=tripped)

    return InputGuardrail(
        guardrail_function=foureyes_triage, name=name, run_in_parallel=run_in_parallel
    )


def check_guardrail(
    guard: Guard,
    *,
    conversation_of: ConversationOf = conversation_of_context,
    region: str | None = None,
    locale: str | None = None,
    name: str = "foureyes_check",
) -> OutputGuardrail[Any]:
    """An output guardrail that checks the agent's final output (:meth:`Guard.check`).

    The output (text, or structured output as JSON text: :func:`draft_text`) is the draft;
    the run's input messages (:func:`chat_messages` of the run's turn input) are the
    conversation, its last user message triaged again (the check is the whole of
    ``POST /v1/check``; so a message that reaches L1 spends two L1 calls of the daily
    limit, one per guardrail). The tripwire fires unless the
    output is released exactly as written: a fallback, or a release with crisis resources
    added. ``output_info`` is a :class:`CheckInfo`; on the tripwire deliver its ``text``.

    Args:
        guard: an open guard.
        conversation_of: names the conversation from the run's context.
        region: the user's region (ISO 3166-1 alpha-2), for crisis resources.
        locale: ``en``, ``zh-Hans`` or ``zh-Hant`` for code-rendered text.
        name: the guardrail's name in the SDK's traces.

    Raises (from the run):
        ContractError: an output with no text form, or input with no user message last.
    """

    async def foureyes_check(
        wrapper: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> GuardrailFunctionOutput:
        draft = draft_text(output)
        outcome = await guard.check(
            chat_messages(wrapper.turn_input),
            draft,
            conversation_id=conversation_of(wrapper),
            region=region,
            locale=locale,
        )
        as_is = outcome.decision is Outcome.RELEASED and outcome.text == draft
        info = CheckInfo(
            decision=outcome.decision,
            reason=outcome.reason,
            released_as_is=as_is,
            text=outcome.text,
            delivered_sha256=outcome.delivered_sha256,
            candidate_sha256=outcome.candidate_sha256,
            trace_id=outcome.trace_id,
            policy=outcome.policy.policy,
            risk=outcome.triage.risk_block(),
            outcome=outcome,
        )
        return GuardrailFunctionOutput(output_info=info, tripwire_triggered=not as_is)

    return OutputGuardrail(guardrail_function=foureyes_check, name=name)


def _judge(
    guard: Guard, call: dict[str, Any]
) -> tuple[ToolCallCheck | None, str | None, tuple[str, ...]]:
    """The gate's check of one call, its reason (``None``: allowed) and its notes."""
    try:
        checked = guard.check_tool_calls([call])
    except ContractError as exc:
        return None, INVALID_INPUT, (exc.detail,)
    reason = None if checked.reason is None else checked.reason.value
    return checked, reason, tuple(f.note for f in checked.findings)


def tool_call_guardrail(
    guard: Guard,
    *,
    on_refusal: Literal["reject_content", "raise_exception"] = "reject_content",
    name: str = "foureyes_tool_rules",
) -> ToolInputGuardrail[Any]:
    """A tool input guardrail: the gate's rules on the call before the tool runs.

    The call (its name, id and arguments) is judged by :meth:`Guard.check_tool_calls`,
    the rules a draft with that call would meet (``[gate] tools_allow`` / ``tools_deny``
    first). Arguments that are not strict JSON are refused (reason ``invalid_input``);
    empty arguments are ``{}``, as the SDK reads them. Nothing is recorded and no model
    is called.

    Args:
        guard: an open guard.
        on_refusal: ``reject_content`` (default): the tool does not run and the model is
            told so, the run goes on (its final output still meets the output guardrail);
            ``raise_exception``: the run stops with the SDK's
            ``ToolInputGuardrailTripwireTriggered``.
        name: the guardrail's name in the SDK's traces.
    """

    def foureyes_tool_rules(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        call = {
            "id": context.tool_call_id or "call",
            "type": "function",
            "function": {"name": context.tool_name, "arguments": context.tool_arguments or "{}"},
        }
        checked, reason, notes = _judge(guard, call)
        info = ToolCallInfo(
            tool=context.tool_name,
            allowed=reason is None,
            reason=reason,
            notes=notes,
            check=checked,
        )
        if reason is None:
            return ToolGuardrailFunctionOutput.allow(output_info=info)
        if on_refusal == "raise_exception":
            return ToolGuardrailFunctionOutput.raise_exception(output_info=info)
        message = f"The call to {context.tool_name} was not run: foureyes refused it ({reason})."
        return ToolGuardrailFunctionOutput.reject_content(message, output_info=info)

    return ToolInputGuardrail(guardrail_function=foureyes_tool_rules, name=name)
