"""SWE-agent trajectories (``.traj``) as sessions: one run is one turn.

Both formats are read from ``history`` (what the model was actually sent):

- the system messages become the session's system messages, and the user messages
  before the first assistant message open the turn (a demonstration, marked ``is_demo``,
  is a ``plugin`` message: the harness wrote it, not the user);
- each assistant message is one step: its ``thought`` becomes a reasoning block and its
  ``action`` a tool call. The new format (function calling) names the call in
  ``tool_calls``, kept as a tool-call block with its id and raw arguments; the old format
  has only the action text, kept as a :class:`~foureyes.review.session.ToolCall` event
  with the id ``action-N`` and the command's first word as its name;
- the observation that follows (a ``tool`` message answering ``tool_call_ids`` in the
  new format, the next ``user`` message in the old one) becomes the tool result. The
  last action's observation, which ``history`` may lack, is taken from ``trajectory``.

A file with no ``history`` is read from ``trajectory`` alone (thought, action,
observation per step). ``info.exit_status`` ends the turn: ``submitted`` is
``completed``; cost and context limits are ``max-tokens``; forfeits and early exits
``aborted``; format and environment errors, and any status foureyes does not know,
``error``. Without an exit status the run is still going, and the turn stays open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from foureyes.review.importers._builder import SessionBuilder, shape_error, text_of
from foureyes.review.session import (
    AssistantBlock,
    AssistantMessage,
    EndReason,
    MessageSource,
    ReasoningBlock,
    Session,
    ToolCall,
    ToolCallBlock,
    ToolResult,
    UserMessage,
)

__all__ = ["FORMAT", "from_json"]

FORMAT = "swe-agent"
"""The format's name in :class:`~foureyes.review.importers.SessionFormat` and errors."""

_EXIT = {
    "submitted": EndReason.COMPLETED,
    "exit_cost": EndReason.MAX_TOKENS,
    "exit_context": EndReason.MAX_TOKENS,
    "exit_total_execution_time": EndReason.MAX_TOKENS,
    "exit_forfeit": EndReason.ABORTED,
    "early_exit": EndReason.ABORTED,
    "exit_format": EndReason.ERROR,
    "exit_error": EndReason.ERROR,
    "exit_environment_error": EndReason.ERROR,
}


def from_json(data: Any) -> Session:
    """The session of a decoded ``.traj`` file.

    Raises:
        SessionFormatError: the input is not shaped like a SWE-agent trajectory.
    """
    if not isinstance(data, Mapping):
        raise shape_error(FORMAT, "input", "expected an object with 'history' or 'trajectory'")
    history = data.get("history") or []
    trajectory = data.get("trajectory") or []
    if not isinstance(history, list) or not isinstance(trajectory, list):
        raise shape_error(FORMAT, "input", "'history' and 'trajectory' must be lists")
    if not history and not trajectory:
        raise shape_error(FORMAT, "input", "neither 'history' nor 'trajectory' holds a step")
    builder = SessionBuilder()
    builder.open_turn()
    if history:
        system = _from_history(builder, history, trajectory)
    else:
        system = []
        for n, step in enumerate(trajectory):
            _step(builder, n, _mapping(step, f"trajectory[{n}]"), None)
            _observe(builder, f"action-{n + 1}", step.get("observation"), f"trajectory[{n}]")
    info = data.get("info")
    status = info.get("exit_status") if isinstance(info, Mapping) else None
    if isinstance(status, str) and status:
        builder.end_turn(_end_reason(status))
    return builder.finish(system=system)


def _end_reason(status: str) -> EndReason:
    # "submitted (exit_cost)": submitted automatically because a limit was hit.
    inner = status.removeprefix("submitted (").removesuffix(")")
    # Invariant 4: a status we do not know is never taken for a completed run.
    return _EXIT.get(inner, EndReason.ERROR)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise shape_error(FORMAT, where, "expected an object")
    return value


def _from_history(
    builder: SessionBuilder, history: Sequence[Any], trajectory: Sequence[Any]
) -> list[str]:
    system: list[str] = []
    actions = 0
    answered = True
    for n, raw in enumerate(history):
        where = f"history[{n}]"
        message = _mapping(raw, where)
        role = message.get("role")
        content = text_of(message.get("content"), FORMAT, f"{where}.content")
        if role == "system":
            system.append(content)
        elif role == "assistant":
            actions += 1
            _step(builder, actions - 1, message, where)
            answered = False
        elif role == "tool" or (role == "user" and actions):
            ids = message.get("tool_call_ids") or [f"action-{actions}"]
            for call_id in ids:
                builder.add(ToolResult(call_id=text_of(call_id, FORMAT, where), content=content))
            answered = True
        elif role == "user":
            source = MessageSource.PLUGIN if _truthy(message.get("is_demo")) else MessageSource.USER
            builder.add(UserMessage(content=content, source=source))
        else:
            raise shape_error(FORMAT, where, f"unknown role {role!r}")
    if not answered and len(trajectory) >= actions:
        last = _mapping(trajectory[actions - 1], f"trajectory[{actions - 1}]")
        for call_id in sorted(builder.waiting):
            _observe(builder, call_id, last.get("observation"), f"trajectory[{actions - 1}]")
    return system


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _step(builder: SessionBuilder, n: int, message: Mapping[str, Any], where: str | None) -> None:
    where = where or f"trajectory[{n}]"
    builder.start_step()
    blocks: list[AssistantBlock] = []
    thought = message.get("thought")
    if thought:
        blocks.append(ReasoningBlock(text=text_of(thought, FORMAT, f"{where}.thought")))
    calls = message.get("tool_calls")
    calls = [] if calls is None else calls
    if not isinstance(calls, list):
        raise shape_error(FORMAT, f"{where}.tool_calls", "expected a list")
    for k, call in enumerate(calls):
        function = _mapping(_mapping(call, f"{where}.tool_calls[{k}]").get("function"), where)
        blocks.append(
            ToolCallBlock(
                call_id=text_of(call.get("id"), FORMAT, f"{where}.tool_calls[{k}].id"),
                name=text_of(function.get("name"), FORMAT, f"{where}.tool_calls[{k}].name"),
                arguments=text_of(function.get("arguments"), FORMAT, f"{where}.arguments"),
            )
        )
    builder.add(AssistantMessage(blocks=tuple(blocks)))
    if not calls:
        action = text_of(message.get("action"), FORMAT, f"{where}.action")
        name = action.split(maxsplit=1)[0] if action.strip() else "action"
        builder.add(ToolCall(call_id=f"action-{n + 1}", name=name, arguments=action))


def _observe(builder: SessionBuilder, call_id: str, observation: Any, where: str) -> None:
    if observation is not None:
        content = text_of(observation, FORMAT, f"{where}.observation")
        builder.add(ToolResult(call_id=call_id, content=content))
