"""The offline Supervisor: rules only, honest and deterministic.

Registered with the offline engine when :mod:`foureyes.gate` is imported (and not
before), it judges the candidate in ``request.subject`` by the built-in rules checked in
code: when one fires it rejects, naming each rule and span. Rules that find nothing are
no review of a model's words, so it approves only text the offline Counselor itself can
write (its templates' digests, :func:`foureyes.llm.offline.offline_counselor_digests`)
and answers ``insufficient`` for anything else: a real Counselor behind an offline
Supervisor falls back, never releases unreviewed model text. It names the digest of the
text it actually judged, which the gate then compares with the candidate's.
"""

from __future__ import annotations

import json

from foureyes.config import OFFLINE_ROUTE, GateConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import RouteBadResponse
from foureyes.core.roles import Role
from foureyes.gate.candidate import candidate_bytes_of
from foureyes.gate.rules import RuleCatalogue, RuleContext
from foureyes.gate.verdict import MAX_VIOLATIONS, VerdictDecision
from foureyes.llm.offline import offline_counselor_digests, offline_responder
from foureyes.llm.provider import ChatRequest

__all__ = ["CANNOT_JUDGE", "offline_verdict"]

_DEFAULT_MAX_CHARS = GateConfig().max_chars
_NOTE = "offline rules-only review: {note}"
CANNOT_JUDGE = (
    "offline rules-only review cannot judge model text: it approves only the offline "
    "Counselor's own templates; map [roles] supervisor to a second model"
)
"""The ``missing`` item of the offline Supervisor's ``insufficient`` verdict."""


@offline_responder(Role.SUPERVISOR)
def offline_verdict(request: ChatRequest) -> str:
    """The verdict, as JSON, on ``request.subject["candidate"]``.

    ``reject`` when a built-in rule fires; otherwise ``approve`` for a reply of the
    offline Counselor's templates and ``insufficient`` (``missing``:
    :data:`CANNOT_JUDGE`) for any other text.

    Reads ``candidate``, and ``tool_calls``, ``region`` and ``max_chars`` when given, from
    the subject; ``candidate_sha256`` there is not trusted: the verdict names the digest
    of the candidate it judged (text and tool calls, :mod:`foureyes.gate.candidate`). A
    candidate with tool calls is never one of the offline Counselor's templates, so it is
    ``insufficient`` unless a rule rejects it.

    Raises:
        RouteBadResponse: the subject has no candidate, or a ``max_chars`` that is not a
            positive whole number; no verdict is guessed.
    """
    subject = request.subject
    candidate = subject.get("candidate")
    if candidate is None:
        raise RouteBadResponse(OFFLINE_ROUTE, "the offline supervisor needs subject['candidate']")
    raw_max = subject.get("max_chars", str(_DEFAULT_MAX_CHARS))
    if not raw_max.isdigit() or int(raw_max) < 1:
        raise RouteBadResponse(OFFLINE_ROUTE, f"subject['max_chars'] is not a count: {raw_max!r}")
    context = RuleContext(max_chars=int(raw_max), region=subject.get("region") or None)
    calls = subject.get("tool_calls", "")
    # A finding that points at no character (empty_text on a reply that is only tool
    # calls) cannot be a violation's span, and the gate checks such drafts itself: a
    # verdict naming it would break its own contract (review_malformed, not a verdict).
    findings = [
        f for f in RuleCatalogue.builtin().check(candidate, context) if f.span[0] < f.span[1]
    ]
    digest = sha256_hex(candidate_bytes_of(candidate, calls))
    if findings:
        decision = VerdictDecision.REJECT
    elif not calls and digest in offline_counselor_digests():
        decision = VerdictDecision.APPROVE
    else:
        # Invariant 1: no verdict is no approval, and rules that found nothing are no
        # verdict on a model's text; only a second model may approve it.
        decision = VerdictDecision.INSUFFICIENT
    verdict = {
        "candidate_sha256": digest,
        "decision": decision.value,
        "violations": [
            {"rule": f.rule, "span": list(f.span), "note": _NOTE.format(note=f.note)}
            for f in findings[:MAX_VIOLATIONS]
        ],
        "missing": [CANNOT_JUDGE] if decision is VerdictDecision.INSUFFICIENT else [],
    }
    return json.dumps(verdict, ensure_ascii=False)
