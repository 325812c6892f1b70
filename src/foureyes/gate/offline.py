"""The offline Supervisor: rules only, honest and deterministic.

Registered with the offline engine when :mod:`foureyes.gate` is imported (and not
before), it judges the candidate in ``request.subject`` by the built-in rules checked in
code: it approves when none fires and otherwise rejects, naming each rule and span. It
never claims more than that, and it names the digest of the text it actually judged,
which the gate then compares with the candidate's.
"""

from __future__ import annotations

import json

from foureyes.config import OFFLINE_ROUTE, GateConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import RouteBadResponse
from foureyes.core.roles import Role
from foureyes.gate.rules import RuleCatalogue, RuleContext
from foureyes.gate.verdict import MAX_VIOLATIONS, VerdictDecision
from foureyes.llm.offline import offline_responder
from foureyes.llm.provider import ChatRequest

__all__ = ["offline_verdict"]

_DEFAULT_MAX_CHARS = GateConfig().max_chars
_NOTE = "offline rules-only review: {note}"


@offline_responder(Role.SUPERVISOR)
def offline_verdict(request: ChatRequest) -> str:
    """The verdict, as JSON, of the built-in rules on ``request.subject["candidate"]``.

    Reads ``candidate``, and ``region`` and ``max_chars`` when given, from the subject;
    ``candidate_sha256`` there is not trusted: the verdict names the digest of the text
    it judged.

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
    findings = RuleCatalogue.builtin().check(candidate, context)
    verdict = {
        "candidate_sha256": sha256_hex(candidate),
        "decision": (VerdictDecision.REJECT if findings else VerdictDecision.APPROVE).value,
        "violations": [
            {"rule": f.rule, "span": list(f.span), "note": _NOTE.format(note=f.note)}
            for f in findings[:MAX_VIOLATIONS]
        ],
        "missing": [],
    }
    return json.dumps(verdict, ensure_ascii=False)
