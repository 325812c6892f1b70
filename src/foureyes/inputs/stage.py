"""The ``[input]`` stage's decision: what the findings on a request's inputs do (pure).

Every input of a request is judged before anything is drafted: the user's message, each
``source`` and each tool result (:class:`InputSite`). Each gets its deterministic
:class:`~foureyes.inputs.InputScan` and, with ``[input] model_check``, the model
checker's categories for its digest (or the check's failure). :func:`decide_input`
turns them into one :class:`InputDecision` by the config's table of actions per site
and category:

- ``block``: no model drafts; the fallback goes out with ``input_blocked`` (or
  ``input_unchecked`` when only a failure of a check blocked);
- ``restrict``: the reply may carry no tool calls (a draft with tool calls falls back
  with ``input_restricted``);
- ``strip`` (a source or tool result): its text is replaced by a marker in what every
  model sees, so material carrying instructions is never an instruction to a model;
- ``record``: only the trace keeps the finding.

The strictest action wins (``block`` over ``restrict`` over ``strip`` over ``record``).
A check that could not judge an input (a scan refused, a check that raised or answered
nonsense, a model check's timeout, malformed answer, wrong digest, budget or route
error) takes ``[input] on_failure``: restricted by default, never taken as clean.
Crisis triage is not part of this decision: it runs whatever the inputs hold, and a
prohibition still sends the crisis reply (the gate decides that first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foureyes.config import InputConfig
from foureyes.core.reasons import ReasonCode
from foureyes.inputs.check import FindingReason, InputCategory, InputScan
from foureyes.inputs.model_check import ModelCheckError, ModelJudgement

__all__ = [
    "InputAction",
    "InputDecision",
    "InputSite",
    "JudgedInput",
    "STRIPPED_MARKER",
    "decide_input",
    "flagging_run",
]

STRIPPED_MARKER = "[withheld by foureyes: this {site} was judged {categories}]"
"""What replaces a stripped source's or tool result's text in what models see."""

_FAILED = frozenset({FindingReason.CHECK_FAILED, FindingReason.INVALID_FINDING})


class InputSite(StrEnum):
    """Where in the request an input is."""

    MESSAGE = "message"
    """The user's current message."""
    SOURCE = "source"
    """A ``source`` of the request (material the reply may rely on)."""
    TOOL_RESULT = "tool_result"
    """A ``tool`` message of the conversation (the result of an earlier call)."""


class InputAction(StrEnum):
    """What the stage does, from least to most restrictive."""

    PASS = "pass"
    """Nothing found."""
    RECORD = "record"
    """The trace keeps the finding; nothing else changes."""
    STRIP = "strip"
    """The input's text is withheld from every model (sources and tool results)."""
    RESTRICT = "restrict"
    """The reply may carry no tool calls."""
    BLOCK = "block"
    """No model drafts; the fallback goes out."""

    @property
    def rank(self) -> int:
        """Its place in the order above (0 for ``pass``)."""
        return _RANK[self]


_RANK = {action: rank for rank, action in enumerate(InputAction)}


@dataclass(frozen=True, slots=True)
class JudgedInput:
    """One input with what the checks said of it."""

    ref: str
    """Where it is: ``message``, ``source:ID``, ``tool:CALL_ID``."""
    site: InputSite
    """What kind of input it is."""
    scan: InputScan
    """The deterministic scan of the text the models would see."""
    model: ModelJudgement | ModelCheckError | None = None
    """The model check's judgement of the whole request, or its failure; ``None`` when
    the model check is off."""
    seen_sha256: str | None = None
    """SHA-256 of the text models were shown, when it is not the scanned text (personal
    data masked); the model's judgement is looked up by it."""

    @property
    def seen(self) -> str:
        """SHA-256 of the text models were shown."""
        return self.seen_sha256 or self.scan.sha256

    def categories(self) -> frozenset[InputCategory]:
        """What the checks found in this input (a failing check's findings excluded)."""
        found = {f.category for f in self.scan.findings if f.reason not in _FAILED}
        if isinstance(self.model, ModelJudgement):
            found |= self.model.categories.get(self.seen, frozenset())
        return frozenset(found)

    def failures(self) -> tuple[str, ...]:
        """Why a check could not judge this input (reason codes), in a fixed order."""
        reasons: list[str] = []
        if self.scan.refused is not None:
            reasons.append(str(self.scan.refused))
        reasons += sorted({f.reason for f in self.scan.findings if f.reason in _FAILED})
        if isinstance(self.model, ModelCheckError):
            reasons.append(f"model_{self.model.reason.value}")
        return tuple(reasons)


@dataclass(frozen=True, slots=True)
class InputOutcome:
    """What the stage does with one input, and why."""

    judged: JudgedInput
    """The input and its checks."""
    action: InputAction
    """The strictest action its findings and failures call for."""
    categories: frozenset[InputCategory]
    """What was found."""
    failures: tuple[str, ...]
    """Why a check could not judge it."""
    found: InputAction = InputAction.PASS
    """The strictest action the findings alone call for (failures of checks aside)."""

    def as_json(self) -> dict[str, Any]:
        """The input's record: its place, digest, findings and action; never its text."""
        model = self.judged.model
        return {
            "ref": self.judged.ref,
            "site": self.judged.site.value,
            "action": self.action.value,
            "categories": sorted(self.categories),
            "failures": list(self.failures),
            "scan": self.judged.scan.as_json(),
            "model": None
            if model is None
            else (
                {"failure": model.reason.value, "detail": model.detail}
                if isinstance(model, ModelCheckError)
                else {
                    "route": model.route,
                    "categories": sorted(model.categories.get(self.judged.seen, ())),
                }
            ),
        }


@dataclass(frozen=True, slots=True)
class InputDecision:
    """What the stage decided for the whole request."""

    action: InputAction
    """The strictest action over all inputs (a ``strip`` applies to its inputs only,
    see :attr:`stripped`)."""
    reason: ReasonCode | None
    """``input_blocked`` or ``input_unchecked`` when :attr:`action` is ``block``."""
    inputs: tuple[InputOutcome, ...]
    """Each input's outcome, in the request's order."""
    flagged_by: str | None = None
    """The earlier run of the conversation whose flag restricts this one, if any."""

    @property
    def stripped(self) -> frozenset[str]:
        """The refs of the inputs whose text models must not see."""
        # A source both stripped by a finding and restricted by a failing check is still
        # withheld: the stricter action on the reply does not give its text back.
        return frozenset(
            o.judged.ref
            for o in self.inputs
            if InputAction.STRIP in (o.action, o.found) and o.judged.site is not InputSite.MESSAGE
        )

    @property
    def blocks(self) -> bool:
        """Whether no model may draft."""
        return self.action is InputAction.BLOCK

    @property
    def restricts_tools(self) -> bool:
        """Whether the reply may carry no tool calls."""
        return self.action is InputAction.RESTRICT

    def outcome(self, ref: str) -> InputOutcome:
        """The outcome of the input at ``ref``.

        Raises:
            KeyError: no input has that ref.
        """
        for item in self.inputs:
            if item.judged.ref == ref:
                return item
        raise KeyError(ref)

    def as_json(self) -> dict[str, Any]:
        """The stage's trace event: actions, digests and findings; never a text."""
        return {
            "action": self.action.value,
            "reason": None if self.reason is None else self.reason.value,
            "flagged_by": self.flagged_by,
            "inputs": [o.as_json() for o in self.inputs],
        }


def _action_of(judged: JudgedInput, config: InputConfig) -> InputOutcome:
    table: dict[Any, str] = dict(
        config.message if judged.site is InputSite.MESSAGE else config.sources
    )
    categories = judged.categories()
    failures = judged.failures()
    found = max(
        (InputAction(table.get(c.value, "record")) for c in categories),
        key=lambda a: a.rank,
        default=InputAction.PASS,
    )
    failed = InputAction(config.on_failure) if failures else InputAction.PASS
    action = max(found, failed, key=lambda a: a.rank)
    return InputOutcome(judged, action, categories, failures, found)


def decide_input(
    judged: Sequence[JudgedInput], config: InputConfig, *, flagged_by: str | None = None
) -> InputDecision:
    """The stage's decision on ``judged`` under ``config`` (pure).

    ``block`` and ``restrict`` apply to the whole reply; ``strip`` withholds one input.
    The reason of a block is ``input_blocked`` when a finding calls for it, else (only a
    failure of a check did) ``input_unchecked``. With ``flagged_by`` (the conversation's
    flag, :func:`flagging_run`) the reply is at least restricted.
    """
    outcomes = tuple(_action_of(item, config) for item in judged)
    action = max((o.action for o in outcomes), key=lambda a: a.rank, default=InputAction.PASS)
    if flagged_by is not None and action.rank < InputAction.RESTRICT.rank:
        action = InputAction.RESTRICT
    reason: ReasonCode | None = None
    if action is InputAction.BLOCK:
        by_finding = any(o.found is InputAction.BLOCK for o in outcomes)
        reason = ReasonCode.INPUT_BLOCKED if by_finding else ReasonCode.INPUT_UNCHECKED
    return InputDecision(action, reason, outcomes, flagged_by)


_FLAGGING = frozenset({InputCategory.PROMPT_INJECTION.value, InputCategory.JAILBREAK.value})


def flagging_run(events: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
    """The run whose input event flags the conversation, from its latest runs' events (pure).

    ``events`` are ``(trace_id, data)`` of the ``input`` events of the conversation's
    latest runs, newest first (``[input] flag_turns`` of them). A run flags when one of
    its inputs had an injection or a jailbreak and was restricted or blocked for it; a
    run restricted only by an earlier flag does not flag again, so the flag ends
    ``flag_turns`` messages after the last attack. Data that is not such a record (an
    older version's, a damaged one) flags nothing.
    """
    for trace_id, data in events:
        inputs = data.get("inputs")
        if not isinstance(inputs, list):
            continue
        for item in inputs:
            if not isinstance(item, Mapping):
                continue
            categories = item.get("categories")
            if (
                isinstance(categories, list)
                and _FLAGGING.intersection(c for c in categories if isinstance(c, str))
                and item.get("action") in ("restrict", "block")
            ):
                return trace_id
    return None
