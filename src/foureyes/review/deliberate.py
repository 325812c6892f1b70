"""The ``deliberate`` tool: a review of its own work the primary agent asks for itself.

A host adds :func:`deliberate_tool` (an OpenAI ``tools`` entry) to its agent's tools.
When the agent calls it, the host hands the call's raw ``arguments`` and its session to
:func:`run_deliberate`, which runs the one review path (:meth:`Reviewer.review
<foureyes.review.reviewer.Reviewer.review>`: project, build the request, the one
:class:`~foureyes.review.runner.ReviewRunner`) and returns a :class:`DeliberateResult`
whose :attr:`~DeliberateResult.text` is the tool result to give back. Nothing raises into
the host's loop: bad arguments, a skipped projection and a run without a packet are all
results with a reason code.

**Arguments.** ``role`` (required) picks the view; ``recentSteps`` (optional, default 3)
is the window of ``masked-review``: an integer K for ``recent:K``, or a window spec as
:meth:`Window.parse <foureyes.review.projection.Window.parse>` reads it (``recent:K``,
``since-last-mutation``, ``current-turn``, ``all-turns``). The other two roles always
cover the whole session (``all-turns``): a valid ``recentSteps`` is ignored for them (the
result's ``window`` says ``all-turns``), a malformed one is refused for every role. The
roles, each a fixed view over :meth:`~foureyes.review.reviewer.Reviewer.review`:

- ``masked-review``: the reviewer sees the window's actions, outcomes and visible text,
  not its reasoning (mask ``reasoning-only``), under the primary's own system prompt and
  tools (``cache-aligned``); the steps before the window stay in the native prefix;
- ``trajectory-audit``: the full unmasked fork: window ``all-turns``, mask ``none``, under
  the primary's system prompt and tools (``cache-aligned``). The reviewer sees the whole
  trajectory as the primary saw it (the user's messages, the primary's reasoning, visible
  text, every action and every outcome) and audits it. A session too long for that is a
  skip (``over_chars``, ``over_tokens``), never a shorter view;
- ``independent-alternative``: a fresh view: the task view of the projection
  (``task_only``, window ``all-turns``) under the reviewer's own system prompt
  (``reviewer-persona``, :data:`~foureyes.review.reviewer.TASK_VIEW_PERSONA`). The
  reviewer sees the task as the user stated it (the session's user messages) and nothing
  of the primary's trajectory (none of its reasoning, messages, actions or outcomes, nor
  the primary's system prompt and tools), and is asked for its own approach and answer,
  for the primary to compare with its own. It sees the current state only through
  read-only tools its host gives it: pass any
  :class:`~foureyes.review.runner.ReviewTools` as ``tools=`` to :func:`run_deliberate`
  (the eval harness's :class:`~foureyes.evals.workspace.ReadOnlyTools`, ``read`` and
  ``search`` over the agent's :class:`~foureyes.evals.workspace.Workspace`, is one, as
  the ``reviewer-persona`` checkpoint of ``evals.agent_arm`` uses it); the runner
  answers its calls (at most ``MAX_TOOL_ROUNDS``) and the persona says they only read.
  Without tools it has the task alone. The two ``cache-aligned`` roles are never given
  them: their request carries the primary's tools, which a reviewer must not call.

Whatever the role, the answer is a packet under the one contract (its ``role`` is
``masked-review``, docs/design.md 5). Only ``masked-review`` is a masked review of the
turn for the automatic checkpoint: with ``session_id``, it is noted in the checkpoint
latch and the checkpoint skips the turn; the unmasked audit and the fresh view, which
reviews no step, leave the checkpoint to run.

**The session reviewed** is the one the host passes, as it stands when the call is made:
the step that made the call is still in flight (its batch has no result for this call
yet), and a projection never shows a step in flight, so neither the pending ``deliberate``
call nor its step's other calls are reviewed; the steps before it are.

**The result text** (:attr:`DeliberateResult.text`) opens with one line of JSON,
``{"deliberate": status, "reason": code, ...}`` (``masked_steps``: the complete steps
the view covers, shown or, in the fresh view, hidden whole); for a packet, the
publication header and the packet's rendering in a ``review_packet`` data block follow, as
:func:`~foureyes.review.publication.packet_text` writes them (the packet is another
model's text, docs/design.md 4, invariant 7). The statuses are :class:`DeliberateStatus`.
Publication: the agent asked, so every accepted packet, ``no_update`` included, is its
answer, except under the ``observe-only`` policy, which never touches the agent: the
packet is recorded and the result says ``withheld``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foureyes.core.locale import Locale
from foureyes.review.packet import ReviewPacket
from foureyes.review.projection import MAX_RECENT_STEPS, Mask, Window
from foureyes.review.publication import PublicationPolicy, packet_text
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, SessionReview
from foureyes.review.runner import ReviewTools, ReviewTrigger
from foureyes.review.session import Session

__all__ = [
    "DELIBERATE_DEFAULT_WINDOW",
    "DELIBERATE_TOOL",
    "DeliberateCall",
    "DeliberateRefusal",
    "DeliberateResult",
    "DeliberateRole",
    "DeliberateStatus",
    "deliberate_tool",
    "parse_deliberate_arguments",
    "run_deliberate",
]

DELIBERATE_TOOL = "deliberate"
"""The tool's function name."""
DELIBERATE_DEFAULT_WINDOW = Window.recent(3)
"""The window when ``recentSteps`` is left out (as ``POST /v1/review``'s default)."""


class DeliberateRole(StrEnum):
    """Which view of its session the agent asks for (see the module doc)."""

    MASKED_REVIEW = "masked-review"
    """The window's actions, outcomes and visible text; reasoning masked; the primary's
    system prompt and tools."""
    TRAJECTORY_AUDIT = "trajectory-audit"
    """The full unmasked fork: the whole session, reasoning included; the primary's system
    prompt and tools."""
    INDEPENDENT_ALTERNATIVE = "independent-alternative"
    """A fresh view: the user's task alone, none of the primary's steps, under the
    reviewer's own system prompt; the reviewer proposes its own approach and answer."""


@dataclass(frozen=True, slots=True)
class _View:
    mask: Mask
    mode: RequestMode
    window: Window | None = None
    """The role's own window; ``None``: the call's ``recentSteps``."""
    task_only: bool = False


_VIEWS: dict[DeliberateRole, _View] = {
    DeliberateRole.MASKED_REVIEW: _View(Mask.REASONING_ONLY, RequestMode.CACHE_ALIGNED),
    DeliberateRole.TRAJECTORY_AUDIT: _View(
        Mask.NONE, RequestMode.CACHE_ALIGNED, Window.all_turns()
    ),
    # The task view hides every step whole; action-only is the mask it records, the
    # strongest there is (it has nothing left to hide).
    DeliberateRole.INDEPENDENT_ALTERNATIVE: _View(
        Mask.ACTION_ONLY, RequestMode.REVIEWER_PERSONA, Window.all_turns(), task_only=True
    ),
}


class DeliberateStatus(StrEnum):
    """What a ``deliberate`` call came to: the ``deliberate`` field of its result."""

    PACKET = "packet"
    """An accepted packet follows (``reason``: ``accepted``)."""
    WITHHELD = "withheld"
    """A packet was accepted and recorded, but the ``observe-only`` policy keeps it from
    the agent (``reason``: ``observe_only``)."""
    SKIPPED = "skipped"
    """The projection or the request did not fit; no model was called (``reason``: a
    :class:`~foureyes.review.projection.SkipReason`)."""
    NO_PACKET = "no_packet"
    """The reviewer was called, or could not be, and gave no packet (``reason``: a
    :class:`~foureyes.review.runner.ReviewReason`)."""
    REFUSED = "refused"
    """The arguments were not a valid call (``reason``: a :class:`DeliberateRefusal`);
    nothing was projected or called. The only status marked as a tool error."""


class DeliberateRefusal(StrEnum):
    """Why the arguments of a ``deliberate`` call were refused."""

    NOT_JSON = "not_json"
    """The arguments are not strict JSON."""
    NOT_OBJECT = "not_object"
    """The arguments are JSON, but not an object."""
    UNKNOWN_KEY = "unknown_key"
    """A key other than ``role`` and ``recentSteps``."""
    MISSING_ROLE = "missing_role"
    """No ``role``."""
    UNKNOWN_ROLE = "unknown_role"
    """A ``role`` outside :class:`DeliberateRole`."""
    BAD_WINDOW = "bad_window"
    """A ``recentSteps`` that is neither an integer K >= 1 nor a window spec."""


_WINDOWS = "'recent:K', 'since-last-mutation', 'current-turn' or 'all-turns'"


def deliberate_tool() -> dict[str, Any]:
    """The OpenAI ``tools`` entry of ``deliberate`` (a fresh dict each call)."""
    return {
        "type": "function",
        "function": {
            "name": DELIBERATE_TOOL,
            "description": (
                "Ask another model for a second look before you commit to an answer you "
                "are not sure of. It answers with a short review packet (observations, "
                "possible errors, the cheapest check, or its own approach and answer). "
                "The role chooses what it sees: your recent steps without your reasoning, "
                "your whole session with your reasoning, or only the user's task."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "role": {
                        "type": "string",
                        "enum": [role.value for role in DeliberateRole],
                        "description": (
                            "masked-review: your last recentSteps steps (your actions, their "
                            "results and your visible text, not your reasoning), reviewed "
                            "under your own instructions; "
                            "trajectory-audit: your whole session as you saw it (the user's "
                            "messages, your reasoning and messages, every action and result), "
                            "audited under your own instructions; "
                            "independent-alternative: a reviewer with its own instructions "
                            "sees only the user's messages, none of your steps, and proposes "
                            "its own approach and answer for you to compare with yours."
                        ),
                    },
                    "recentSteps": {
                        "anyOf": [
                            {"type": "integer", "minimum": 1},
                            {"type": "string"},
                        ],
                        "description": (
                            "For masked-review: how many of your last steps to review (an "
                            f"integer, at most {MAX_RECENT_STEPS} are used), or {_WINDOWS}. "
                            "Default 3. The other roles always cover the whole session and "
                            "ignore it."
                        ),
                    },
                },
                "required": ["role"],
                "additionalProperties": False,
            },
        },
    }


@dataclass(frozen=True, slots=True)
class DeliberateCall:
    """The valid arguments of one ``deliberate`` call."""

    role: DeliberateRole
    """The view asked for."""
    window: Window
    """The window reviewed: ``recentSteps`` for ``masked-review``, else ``all-turns``."""

    @property
    def mask(self) -> Mask:
        """The role's mask."""
        return _VIEWS[self.role].mask

    @property
    def mode(self) -> RequestMode:
        """The role's request mode."""
        return _VIEWS[self.role].mode

    @property
    def task_only(self) -> bool:
        """Whether the role's view is the task view (``independent-alternative``)."""
        return _VIEWS[self.role].task_only


@dataclass(frozen=True, slots=True)
class DeliberateResult:
    """What one ``deliberate`` call came to; :attr:`text` is its tool result."""

    status: DeliberateStatus
    """What it came to."""
    reason: str
    """Its reason code: ``accepted``, ``observe_only``, a skip reason, a review reason or a
    :class:`DeliberateRefusal`."""
    call: DeliberateCall | None = None
    """The parsed arguments; ``None`` when refused."""
    review: SessionReview | None = None
    """The review that ran (or was skipped); ``None`` when refused."""
    detail: str = ""
    """A short detail for a refusal or a failure (no reviewer text)."""
    locale: Locale = Locale.EN
    """The language of the packet's header."""

    @property
    def packet(self) -> ReviewPacket | None:
        """The packet handed to the agent (``None`` unless :attr:`status` is ``packet``)."""
        if self.status is not DeliberateStatus.PACKET or self.review is None:
            return None
        return self.review.outcome.packet if self.review.outcome else None

    @property
    def error(self) -> bool:
        """Whether the tool result is an error (only a refusal is)."""
        return self.status is DeliberateStatus.REFUSED

    def head(self) -> dict[str, Any]:
        """The first line of :attr:`text` as data."""
        head: dict[str, Any] = {"deliberate": self.status.value, "reason": self.reason}
        if self.call is not None:
            head |= {"role": self.call.role.value, "window": str(self.call.window)}
        if self.review is not None and self.review.meta.effective_k is not None:
            head["masked_steps"] = self.review.meta.effective_k
        if self.detail:
            head["detail"] = self.detail
        return head

    def as_json(self) -> dict[str, Any]:
        """The result as plain JSON data: the head's facts, the tool result, the review."""
        return {
            "status": self.status.value,
            "reason": self.reason,
            "error": self.error,
            "content": self.text,
            "role": self.call.role.value if self.call else None,
            "window": str(self.call.window) if self.call else None,
            "review": self.review.as_json() if self.review else None,
        }

    @property
    def text(self) -> str:
        """The tool result: the JSON head line, then the packet for ``packet``."""
        line = json.dumps(self.head(), ensure_ascii=False, separators=(",", ":"))
        packet = self.packet
        return line if packet is None else f"{line}\n{packet_text(packet, locale=self.locale)}"


def parse_deliberate_arguments(arguments: str) -> DeliberateCall | DeliberateResult:
    """Read a ``deliberate`` call's raw arguments; a refused call is a :class:`DeliberateResult`.

    Pure: nothing is projected or called.
    """
    try:
        raw = json.loads(arguments or "{}", parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        return _refused(DeliberateRefusal.NOT_JSON, f"arguments are not JSON: {exc}")
    if not isinstance(raw, dict):
        return _refused(DeliberateRefusal.NOT_OBJECT, "arguments must be a JSON object")
    extra = sorted(set(raw) - {"role", "recentSteps"})
    if extra:
        return _refused(DeliberateRefusal.UNKNOWN_KEY, f"unknown keys: {', '.join(extra)}")
    if "role" not in raw:
        return _refused(DeliberateRefusal.MISSING_ROLE, "give a role")
    roles = ", ".join(role.value for role in DeliberateRole)
    try:
        role = DeliberateRole(raw["role"])
    except ValueError:
        return _refused(DeliberateRefusal.UNKNOWN_ROLE, f"role must be one of {roles}")
    window = _window(raw.get("recentSteps"))
    if window is None:
        detail = f"recentSteps must be an integer K >= 1 or {_WINDOWS}"
        return _refused(DeliberateRefusal.BAD_WINDOW, detail)
    return DeliberateCall(role, _VIEWS[role].window or window)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _window(value: Any) -> Window | None:
    if value is None:
        return DELIBERATE_DEFAULT_WINDOW
    if type(value) is int:  # not a bool
        return Window.recent(value) if value >= 1 else None
    if isinstance(value, str):
        try:
            return Window.parse(value)
        except ValueError:
            return None
    return None


def _refused(reason: DeliberateRefusal, detail: str) -> DeliberateResult:
    return DeliberateResult(DeliberateStatus.REFUSED, reason.value, detail=detail)


async def run_deliberate(
    reviewer: Reviewer,
    session: Session,
    arguments: str,
    *,
    session_id: str | None = None,
    tools: ReviewTools | None = None,
) -> DeliberateResult:
    """Carry out one ``deliberate`` call on ``session`` (see the module doc).

    Args:
        reviewer: the host's reviewer (its runner, limits, policy and latch).
        session: the agent's session as it stands at the call (only read).
        arguments: the call's raw arguments, as the model wrote them.
        session_id: the host's id of the session: recorded in the trace, and a
            ``masked-review`` noted in the checkpoint latch, so the automatic checkpoint
            skips the turn.
        tools: read-only tools over the agent's current state (e.g. its workspace),
            offered to the ``independent-alternative`` reviewer only (the
            ``reviewer-persona`` role); the other roles never run them.

    Raises:
        StoreError: the review could not be recorded (as :meth:`Reviewer.review`).
    """
    call = parse_deliberate_arguments(arguments)
    if isinstance(call, DeliberateResult):
        return call
    observe = reviewer.policy is PublicationPolicy.OBSERVE_ONLY
    review = await reviewer.review(
        session,
        window=call.window,
        mask=call.mask,
        mode=call.mode,
        session_id=session_id,
        trigger=ReviewTrigger.MANUAL,
        tools=tools,
        task_only=call.task_only,
        # The agent asked: every accepted packet is its answer, unless nothing may reach it.
        policy=PublicationPolicy.OBSERVE_ONLY if observe else PublicationPolicy.ALL,
    )
    locale = reviewer.locale
    if review.skipped is not None:
        status, reason = DeliberateStatus.SKIPPED, review.skipped.reason.value
        return DeliberateResult(status, reason, call, review, locale=locale)
    assert review.outcome is not None  # exactly one of skipped and outcome is set
    outcome = review.outcome
    if outcome.packet is None:
        status, reason = DeliberateStatus.NO_PACKET, outcome.reason.value
        return DeliberateResult(status, reason, call, review, outcome.detail, locale)
    if observe:
        return DeliberateResult(DeliberateStatus.WITHHELD, "observe_only", call, review)
    return DeliberateResult(DeliberateStatus.PACKET, outcome.reason.value, call, review, "", locale)
