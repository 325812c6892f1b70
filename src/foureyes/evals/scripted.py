"""The offline agent-tasks run: a scripted Primary and reviewer through ``foureyes simulate``.

With no model route for the Primary, ``foureyes eval run agent-tasks`` serves two
scripted models from an in-process simulator on 127.0.0.1 (:func:`scripted_config`,
:func:`~foureyes.llm.simulate.serving`) and records the run's mode as ``scripted``, so
the report says what it is: a demonstration of every metric, not a finding about models.

Each task gets one of three scripts, in turn by the suite's order (:class:`Script`):

- ``catches``: the Primary makes the task's plausible wrong fix (``wrong/``) and stops; the
  reviewer flags that the change covers the reported example only; shown that, the Primary
  writes the right fix (``right/``): a correction for every arm that shows the packet;
- ``misleads``: the Primary makes the right fix; the reviewer says it overreaches; shown
  that, the Primary writes the wrong fix: a false diversion;
- ``silent``: the Primary makes the wrong fix; the reviewer answers ``no_update``; shown
  anything (always-show, the simple verifier), it writes the same files again: nothing
  changes, nothing is adopted.

The rules match on the whole request (``match_scope = "request"``): the task statement is
in every request of its pair, and markers the scripted ``run`` calls print
(``scripted:<task>:first``, ``...:after``) say how far the pair has gone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from foureyes.config import Config
from foureyes.core.roles import Role
from foureyes.evals.agent_tasks import AgentTask, TaskFix

__all__ = [
    "PRIMARY_MODEL",
    "REVIEWER_MODEL",
    "SCRIPTED_MODE",
    "Script",
    "needs_script",
    "scripted_config",
    "scripted_scenario",
]

PRIMARY_MODEL = "scripted-primary"
"""The simulator's model name for the scripted Primary."""
REVIEWER_MODEL = "scripted-reviewer"
"""The simulator's model name for the scripted reviewer."""
SCRIPTED_MODE = "scripted"
"""The run mode stored in its facts (beside ``live``, ``record`` and ``replay``)."""
_SHOWN = "DATA review_packet"
"""What a published packet carries into the Primary's context."""
_PRIMARY_USAGE = {"prompt_tokens": 900, "completion_tokens": 60, "reasoning_tokens": 20}
_REVIEWER_USAGE = {"prompt_tokens": 1400, "completion_tokens": 90, "reasoning_tokens": 30}
# Prices per million tokens of a flash-class route, so cost columns show what they count.
_PRICE_IN, _PRICE_OUT = 0.27, 1.10


class Script(StrEnum):
    """What the scripted reviewer does with one task."""

    CATCHES = "catches"
    """It flags the plausible wrong fix; the Primary fixes the task after seeing it."""
    MISLEADS = "misleads"
    """It talks a right fix into the wrong one."""
    SILENT = "silent"
    """It has nothing to add."""


def _fix_calls(task: AgentTask, fix: TaskFix, marker: str) -> list[dict[str, Any]]:
    folder = task.folder / fix.value
    calls = [
        {
            "name": "edit",
            "arguments": json.dumps(
                {"path": str(p.relative_to(folder)), "content": p.read_text(encoding="utf-8")}
            ),
        }
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]
    calls.append({"name": "run", "arguments": json.dumps({"command": f"echo {marker}"})})
    return calls


def _packet(status: str, content: str | None = None) -> str:
    wire: dict[str, Any] = {"role": "masked-review", "status": status}
    if content is not None:
        wire["items"] = [{"kind": "possible_error", "certainty": "likely", "content": content}]
    return json.dumps(wire)


_REVIEWS = {
    Script.CATCHES: _packet(
        "update",
        "The change makes the reported example pass, but the task statement covers more "
        "cases than that one; nothing run so far checks them.",
    ),
    Script.MISLEADS: _packet(
        "update",
        "The change goes beyond the reported example; the other cases it touches may have "
        "been right before. Keep the change to the reported case.",
    ),
    Script.SILENT: _packet("no_update"),
}


def scripted_scenario(tasks: Sequence[AgentTask]) -> tuple[dict[str, Any], dict[str, Script]]:
    """The simulator scenario of ``tasks`` and each task's script, in turn by order."""
    primary: list[dict[str, Any]] = []
    reviewer: list[dict[str, Any]] = []
    scripts: dict[str, Script] = {}
    order = list(Script)
    for n, task in enumerate(tasks):
        script = order[n % len(order)]
        scripts[task.case.id] = script
        statement = re.escape(task.statement[:120])
        first, after = {
            Script.CATCHES: (TaskFix.WRONG, TaskFix.RIGHT),
            Script.MISLEADS: (TaskFix.RIGHT, TaskFix.WRONG),
            Script.SILENT: (TaskFix.WRONG, TaskFix.WRONG),
        }[script]
        first_mark, after_mark = f"scripted:{task.case.id}:first", f"scripted:{task.case.id}:after"

        def rule(pattern: str, **answer: Any) -> dict[str, Any]:
            return {"match": pattern, "match_scope": "request", "usage": _PRIMARY_USAGE, **answer}

        primary += [
            rule(f"(?s){statement}.*{_SHOWN}.*{after_mark}", content="Done."),
            rule(f"(?s){statement}.*{_SHOWN}", tool_calls=_fix_calls(task, after, after_mark)),
            rule(f"(?s){statement}.*{first_mark}", content="Fixed the reported case."),
            rule(f"(?s){statement}", tool_calls=_fix_calls(task, first, first_mark)),
        ]
        reviewer.append(
            {
                "match": f"(?s){statement}",
                "match_scope": "request",
                "usage": _REVIEWER_USAGE,
                "content": _REVIEWS[script],
            }
        )
    # A review that cannot see the statement (its mask hid it) has nothing to add.
    reviewer.append({"usage": _REVIEWER_USAGE, "content": _REVIEWS[Script.SILENT]})
    return {"models": {PRIMARY_MODEL: primary, REVIEWER_MODEL: reviewer}}, scripts


def scripted_config(cfg: Config, base_url: str) -> Config:
    """``cfg`` with the Primary and the reviewer on the scripted models at ``base_url``."""
    route = {"kind": "openai", "base_url": base_url, "timeout_s": 30}
    prices = {"price_in": _PRICE_IN, "price_out": _PRICE_OUT}
    data = cfg.model_dump(mode="json")
    data["routes"] = {
        **data["routes"],
        "scripted_primary": {**route, "model": PRIMARY_MODEL, **prices},
        "scripted_reviewer": {**route, "model": REVIEWER_MODEL, **prices},
    }
    data["roles"] = {
        **data["roles"],
        "primary": "scripted_primary",
        "reviewer": "scripted_reviewer",
    }
    return Config.model_validate(data)


def needs_script(cfg: Config) -> bool:
    """Whether ``cfg`` has no model for the Primary (its route is the offline engine)."""
    return cfg.routes[cfg.roles.route_for(Role.PRIMARY)].kind == "offline"
