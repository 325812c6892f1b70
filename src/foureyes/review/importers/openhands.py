"""OpenHands event lists (a trajectory's JSON list of actions and observations) as sessions.

- ``system`` actions (newer versions) give the system message and the tools.
- A user ``message`` opens a turn when none is open (else it joins the open one) and
  carries its ``image_urls``.
- Agent actions that came from one model response (the same ``model_response.id`` in
  ``tool_call_metadata``) form one step; an action without that metadata is a step of
  its own. Each action's ``thought`` becomes a reasoning block (as SWE-agent's thought
  does), a ``reasoning_content`` of the model response too. An action with tool-call
  metadata is a tool-call block with the model's call id and raw arguments; one without
  is a :class:`~foureyes.review.session.ToolCall` with the id ``oh-<event id>``. An agent
  ``message`` is visible text, and ``think`` reasoning.
- An observation whose ``cause`` is an action is that action's result (``error``
  observations are failures).
- The turn ends ``completed`` after ``finish`` and after an agent message that waits for
  the user, ``blocked`` after ``reject``; ``agent_state_changed`` observations end it
  too (``error``, ``stopped`` → ``aborted``, ``rejected`` and ``user_rejected`` →
  ``blocked``, ``awaiting_user_input`` and ``finished`` → ``completed``). Other
  observations without a known cause (state changes, recalls, nulls) carry no content
  for a review and are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foureyes.core.digest import canonical_json
from foureyes.review.importers._builder import SessionBuilder, shape_error, text_of
from foureyes.review.session import (
    AssistantBlock,
    AssistantMessage,
    EndReason,
    ImageBlock,
    MessageSource,
    ReasoningBlock,
    Session,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResult,
    UserMessage,
)

__all__ = ["FORMAT", "from_json"]

FORMAT = "openhands"
"""The format's name in :class:`~foureyes.review.importers.SessionFormat` and errors."""

_STATE_END = {
    "awaiting_user_input": EndReason.COMPLETED,
    "finished": EndReason.COMPLETED,
    "error": EndReason.ERROR,
    "stopped": EndReason.ABORTED,
    "rejected": EndReason.BLOCKED,
    "user_rejected": EndReason.BLOCKED,
}


def from_json(data: Any) -> Session:
    """The session of a decoded OpenHands event list.

    Raises:
        SessionFormatError: the input is not shaped like OpenHands events.
    """
    if not isinstance(data, list):
        raise shape_error(FORMAT, "input", "expected a list of events")
    reader = _Reader()
    for n, event in enumerate(data):
        if not isinstance(event, Mapping):
            raise shape_error(FORMAT, f"event {n}", "expected an object")
        reader.read(event, f"event {n}")
    return reader.builder.finish(system=reader.system, tools=reader.tools)


class _Reader:
    def __init__(self) -> None:
        self.builder = SessionBuilder()
        self.system: list[str] = []
        self.tools: list[Mapping[str, Any]] = []
        self.calls: dict[Any, str] = {}  # action event id -> call id
        self.response: str | None = None  # model response of the running step

    def read(self, event: Mapping[str, Any], where: str) -> None:
        args = event.get("args") or {}
        if not isinstance(args, Mapping):
            raise shape_error(FORMAT, f"{where}.args", "expected an object")
        if "observation" in event:
            self._observation(event, where)
        elif event.get("action") == "system":
            self.system.append(text_of(args.get("content"), FORMAT, f"{where}.args.content"))
            tools = args.get("tools") or []
            if not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools):
                raise shape_error(FORMAT, f"{where}.args.tools", "expected a list of objects")
            self.tools.extend(tools)
        elif event.get("source") == "user" and event.get("action") == "message":
            self.builder.end_step()
            self.response = None
            urls = args.get("image_urls") or []
            images = tuple(ImageBlock(ref=text_of(u, FORMAT, f"{where}.image_urls")) for u in urls)
            content = text_of(args.get("content", event.get("message")), FORMAT, where)
            self.builder.add(UserMessage(content=content, source=MessageSource.USER, images=images))
        elif "action" in event:
            self._action(event, args, where)
        else:
            raise shape_error(FORMAT, where, "neither an action nor an observation")

    def _action(self, event: Mapping[str, Any], args: Mapping[str, Any], where: str) -> None:
        action = text_of(event.get("action"), FORMAT, f"{where}.action")
        metadata = event.get("tool_call_metadata")
        response = metadata.get("model_response") if isinstance(metadata, Mapping) else None
        response_id = response.get("id") if isinstance(response, Mapping) else None
        if response_id is None or response_id != self.response or self.builder.step is None:
            self.builder.start_step()
            self.response = response_id if isinstance(response_id, str) else None
            blocks: list[AssistantBlock] = _model_reasoning(response)
        else:
            blocks = []
        thought = args.get("thought")
        if thought:
            blocks.append(ReasoningBlock(text=text_of(thought, FORMAT, f"{where}.args.thought")))
        call: ToolCall | None = None
        if action == "message":
            content = text_of(args.get("content", event.get("message")), FORMAT, where)
            blocks.append(TextBlock(text=content))
        elif isinstance(metadata, Mapping):
            call_id = text_of(metadata.get("tool_call_id"), FORMAT, f"{where}.tool_call_id")
            name = text_of(metadata.get("function_name"), FORMAT, f"{where}.function_name")
            arguments = _raw_arguments(response, call_id) or _arguments(args)
            blocks.append(ToolCallBlock(call_id=call_id, name=name, arguments=arguments))
            self.calls[event.get("id")] = call_id
        elif action != "think":  # a think action is its thought, kept above
            call_id = f"oh-{event.get('id')}"
            call = ToolCall(call_id=call_id, name=action, arguments=_arguments(args))
            self.calls[event.get("id")] = call_id
        self.builder.add(AssistantMessage(blocks=tuple(blocks)))
        if call is not None:
            self.builder.add(call)
        if action == "finish" or (action == "message" and args.get("wait_for_response")):
            self._end(EndReason.COMPLETED)
        elif action == "reject":
            self._end(EndReason.BLOCKED)

    def _observation(self, event: Mapping[str, Any], where: str) -> None:
        call_id = self.calls.get(event.get("cause"))
        if call_id is not None:
            content = text_of(event.get("content", ""), FORMAT, f"{where}.content")
            error = event.get("observation") == "error"
            self.builder.add(ToolResult(call_id=call_id, content=content, error=error))
        elif event.get("observation") == "agent_state_changed":
            extras = event.get("extras")
            state = extras.get("agent_state") if isinstance(extras, Mapping) else None
            if state in _STATE_END and self.builder.turn is not None:
                self._end(_STATE_END[state])

    def _end(self, reason: EndReason) -> None:
        self.builder.end_turn(reason)
        self.response = None


def _model_reasoning(response: Any) -> list[AssistantBlock]:
    choices = response.get("choices") if isinstance(response, Mapping) else None
    message = choices[0].get("message") if isinstance(choices, list) and choices else None
    reasoning = message.get("reasoning_content") if isinstance(message, Mapping) else None
    return [ReasoningBlock(text=reasoning)] if isinstance(reasoning, str) and reasoning else []


def _raw_arguments(response: Any, call_id: str) -> str | None:
    """The arguments exactly as the model wrote them, from the recorded model response."""
    choices = response.get("choices") if isinstance(response, Mapping) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, Mapping) else None
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if call.get("id") == call_id and isinstance(function, Mapping):
                arguments = function.get("arguments")
                return arguments if isinstance(arguments, str) else None
    return None


def _arguments(args: Mapping[str, Any]) -> str:
    """OpenHands' parsed arguments (without the thought) as canonical JSON."""
    return canonical_json({k: v for k, v in args.items() if k != "thought"}).decode("utf-8")
