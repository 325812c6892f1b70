"""The release gate: the Counselor drafts, the Supervisor reviews that version, the gate delivers.

Start with :class:`GateRunner` (``await runner.reply(ReplyRequest(...))``); its
:class:`GateOutcome` says which text went out, based on which data and rules, and if no
candidate did, why not. A draft the caller already has (:class:`GivenDraft`: text and
tool calls) is judged the same way; a candidate's digest covers its text and its tool
calls (:func:`candidate_bytes` defines the bytes: the text in UTF-8, then, only when
there are tool calls, the byte ``0xFF`` and the canonical JSON of the list of calls
``{"arguments", "id", "name"}``). Importing this package registers the offline Supervisor.
"""

from foureyes.gate.candidate import (
    TOOL_SEPARATOR,
    GivenDraft,
    ToolCall,
    ToolCallProblem,
    ToolCallRefused,
    candidate_bytes,
    candidate_sha256,
)
from foureyes.gate.counselor import DRAFT_SCHEMA, Revision, counselor_request, draft_reply
from foureyes.gate.failures import STAGE_FAILURES, Stage, reason_for
from foureyes.gate.fallback import (
    FallbackFamily,
    FallbackTexts,
    ReplyMode,
    configured_texts,
    fallback_text,
    family_of,
    load_fallback_texts,
    parse_fallback_texts,
)
from foureyes.gate.gate import (
    Decision,
    Outcome,
    ToolCallCheck,
    check_tool_calls,
    decide,
    rule_reason,
)
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
    CrisisReply,
    Delivery,
    DeliveryRefused,
    PartKind,
    Release,
    ReleasePart,
    compose_release,
    crisis_reply,
    deliver,
)
from foureyes.gate.request import KeptUnknown, OpenUnknowns, ReplyRequest
from foureyes.gate.review_input import ReviewInput, Source, Turn, assemble_review_input
from foureyes.gate.rules import (
    BUILTIN_RULES,
    TOOL_RULE,
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
    "CrisisReply",
    "DRAFT_SCHEMA",
    "Decision",
    "Delivery",
    "DeliveryRefused",
    "FallbackFamily",
    "FallbackTexts",
    "GateOutcome",
    "GateRunner",
    "GivenDraft",
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
    "ReplyMode",
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
    "TOOL_RULE",
    "TOOL_SEPARATOR",
    "Timings",
    "ToolCall",
    "ToolCallCheck",
    "ToolCallProblem",
    "ToolCallRefused",
    "Turn",
    "Verdict",
    "VerdictDecision",
    "VerdictProblem",
    "Violation",
    "assemble_review_input",
    "candidate_bytes",
    "candidate_sha256",
    "check_tool_calls",
    "check_verdict",
    "compose_release",
    "configured_texts",
    "counselor_request",
    "crisis_reply",
    "decide",
    "decision_record",
    "deliver",
    "draft_reply",
    "fallback_text",
    "family_of",
    "load_fallback_texts",
    "offline_verdict",
    "parse_fallback_texts",
    "reason_for",
    "review_candidate",
    "rule_reason",
    "supervisor_request",
    "verdict_sha256",
]
