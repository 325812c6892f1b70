"""The release gate: the Counselor drafts, the Supervisor reviews that version, the gate delivers.

Start with :class:`GateRunner` (``await runner.reply(ReplyRequest(...))``); its
:class:`GateOutcome` says which text went out, based on which data and rules, and if no
candidate did, why not. Importing this package registers the offline Supervisor.
"""

from foureyes.gate.counselor import DRAFT_SCHEMA, Revision, counselor_request, draft_reply
from foureyes.gate.failures import STAGE_FAILURES, Stage, reason_for
from foureyes.gate.fallback import FallbackFamily, fallback_text, family_of
from foureyes.gate.gate import Decision, Outcome, decide
from foureyes.gate.offline import offline_verdict
from foureyes.gate.outcome import (
    RECORD_SCHEMA,
    Attempt,
    GateOutcome,
    RoleUsage,
    Timings,
    decision_record,
)
from foureyes.gate.release import (
    PART_SEPARATOR,
    Delivery,
    DeliveryRefused,
    PartKind,
    Release,
    ReleasePart,
    compose_release,
    deliver,
)
from foureyes.gate.request import KeptUnknown, OpenUnknowns, ReplyRequest
from foureyes.gate.review_input import ReviewInput, Source, Turn, assemble_review_input
from foureyes.gate.rules import (
    BUILTIN_RULES,
    Rule,
    RuleCatalogue,
    RuleCheck,
    RuleContext,
    RuleFinding,
    RuleInput,
)
from foureyes.gate.runner import RUN_KIND, GateRunner, PendingReply
from foureyes.gate.supervisor import Review, review_candidate, supervisor_request
from foureyes.gate.verdict import (
    MAX_MISSING,
    MAX_VIOLATIONS,
    Verdict,
    VerdictDecision,
    VerdictProblem,
    Violation,
    check_verdict,
    verdict_sha256,
)

__all__ = [
    "Attempt",
    "BUILTIN_RULES",
    "DRAFT_SCHEMA",
    "Decision",
    "Delivery",
    "DeliveryRefused",
    "FallbackFamily",
    "GateOutcome",
    "GateRunner",
    "KeptUnknown",
    "MAX_MISSING",
    "MAX_VIOLATIONS",
    "OpenUnknowns",
    "Outcome",
    "PART_SEPARATOR",
    "PartKind",
    "PendingReply",
    "RECORD_SCHEMA",
    "RUN_KIND",
    "Release",
    "ReleasePart",
    "ReplyRequest",
    "Review",
    "ReviewInput",
    "Revision",
    "RoleUsage",
    "Rule",
    "RuleCatalogue",
    "RuleCheck",
    "RuleContext",
    "RuleFinding",
    "RuleInput",
    "STAGE_FAILURES",
    "Source",
    "Stage",
    "Timings",
    "Turn",
    "Verdict",
    "VerdictDecision",
    "VerdictProblem",
    "Violation",
    "assemble_review_input",
    "check_verdict",
    "compose_release",
    "counselor_request",
    "decide",
    "decision_record",
    "deliver",
    "draft_reply",
    "fallback_text",
    "family_of",
    "offline_verdict",
    "reason_for",
    "review_candidate",
    "supervisor_request",
    "verdict_sha256",
]
