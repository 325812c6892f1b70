"""The Supervisor's stage: the review prompt, the structured call, and the verdict check.

The prompt shows the candidate's digest as 64 lowercase hex characters on its first line
and puts every user- or model-written text (the user's words, earlier turns, sources,
open unknowns, the Counselor's summary, the candidate and each of its tool calls) in a
data block, with
:data:`~foureyes.llm.prompting.DATA_RULE` in the system prompt (invariant 7).
"""

from __future__ import annotations

from dataclasses import dataclass

from foureyes.core.digest import canonical_json
from foureyes.core.roles import Role
from foureyes.gate._prompts import NONE, system_prompt, template, unknowns_list
from foureyes.gate.candidate import tool_calls_json
from foureyes.gate.review_input import ReviewInput, Turn
from foureyes.gate.rules import RuleCatalogue
from foureyes.gate.verdict import Verdict, VerdictProblem, check_verdict, verdict_sha256
from foureyes.llm.prompting import DATA_RULE, data_block
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.structured import ChatCall, StructuredFailure, complete_structured

__all__ = ["Review", "review_candidate", "supervisor_request"]


def _earlier(turn: Turn) -> str:
    """An earlier turn as data: its text, then each call it made as its canonical JSON."""
    calls = [
        data_block("earlier_tool_call", canonical_json(call.as_json()).decode("utf-8"))
        for call in turn.tool_calls
    ]
    return "\n".join([data_block("earlier_turn", turn.text, role=turn.role), *calls])


def supervisor_request(
    review: ReviewInput, catalogue: RuleCatalogue, *, region: str | None, max_chars: int
) -> ChatRequest:
    """The review request for one candidate.

    Its ``subject`` carries the candidate, its tool calls (:func:`tool_calls_json`), its
    digest, the region and the length limit for the offline Supervisor; they are never
    sent to an endpoint.
    """
    system = system_prompt("supervisor_system", catalogue, data_rule=DATA_RULE)
    summary = review.counselor_summary
    user = template("supervisor_user").substitute(
        candidate_sha256=review.candidate_sha256,
        message=data_block("user_message", review.message),
        shown=len(review.earlier),
        omitted=review.omitted_turns,
        earlier="\n".join(_earlier(turn) for turn in review.earlier) or NONE,
        sources="\n".join(
            data_block("source", s.text, id=s.id, origin=s.origin) for s in review.sources
        )
        or NONE,
        unknowns=unknowns_list(review.open_unknowns),
        summary=NONE
        if summary is None
        else data_block("counselor_summary", summary, author="counselor", status="unconfirmed"),
        candidate_chars=len(review.candidate),
        candidate=data_block("candidate", review.candidate, sha256=review.candidate_sha256),
        tool_calls="\n".join(
            data_block("tool_call", canonical_json(call.as_json()).decode("utf-8"))
            for call in review.tool_calls
        )
        or NONE,
    )
    return ChatRequest(
        messages=(ChatMessage.system(system), ChatMessage.user(user)),
        role=Role.SUPERVISOR,
        temperature=0.0,
        response_format="json_object",
        subject={
            "candidate": review.candidate,
            "candidate_sha256": review.candidate_sha256,
            "tool_calls": tool_calls_json(review.tool_calls),
            "region": region or "",
            "max_chars": str(max_chars),
            "user_message": review.message,
        },
    )


@dataclass(frozen=True, slots=True)
class Review:
    """A verdict that met its contract, and whether it fits the candidate."""

    verdict: Verdict
    """The parsed verdict."""
    verdict_sha256: str
    """Its digest (canonical JSON)."""
    problem: VerdictProblem | None
    """Why it cannot be used for this candidate (wrong digest, unknown rule, span out
    of range); ``None`` when it can."""
    attempts: int
    """Calls it took (more than one after a broken answer)."""
    route: str
    """Route that served the verdict."""
    offline: bool
    """Whether the offline engine produced it."""


async def review_candidate(
    call: ChatCall,
    review: ReviewInput,
    catalogue: RuleCatalogue,
    *,
    region: str | None,
    max_chars: int,
    retries: int,
) -> Review:
    """Ask the Supervisor for a verdict on ``review.candidate`` and check it.

    Raises:
        ContractError: every answer broke the verdict contract (prose, truncated or
            invalid JSON, bad enum, inconsistent verdict).
        RouteError: the Supervisor's route failed.
        LimitExceeded: the run's deadline or budget stopped the call.
    """
    request = supervisor_request(review, catalogue, region=region, max_chars=max_chars)
    outcome = await complete_structured(call, request, Verdict, retries=retries)
    if isinstance(outcome, StructuredFailure):
        raise outcome.error
    verdict = outcome.value
    last = outcome.calls[-1]
    return Review(
        verdict=verdict,
        verdict_sha256=verdict_sha256(verdict),
        problem=check_verdict(
            verdict,
            candidate=review.candidate,
            candidate_sha256=review.candidate_sha256,
            catalogue=catalogue,
        ),
        attempts=outcome.attempts,
        route=last.route,
        offline=last.offline,
    )
