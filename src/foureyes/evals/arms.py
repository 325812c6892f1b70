"""What one arm does with one case: the system under test, configured by the arm.

Gate arms run the real :class:`~foureyes.gate.GateRunner` on the case's frozen draft: the
Counselor role is served by a provider that returns that draft, so every arm judges the
same text and only the Supervisor side varies. The arm without a Supervisor applies the
rules checked in code alone. Triage arms run the real :class:`~foureyes.risk.Triage`;
the L1-only arm reads L1's level from the same run (so its cost includes any L2 call).

A failure of the system under test (a route down, a deadline) is data: a
:class:`CaseAnswer` with ``failure`` set, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from foureyes.config import Config, RouteConfig
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.evals.suite import Arm, Case, SuiteError, SuiteKind
from foureyes.gate import GateRunner, ReplyRequest
from foureyes.gate.gate import Outcome
from foureyes.gate.rules import RuleCatalogue, RuleContext
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import ChatRequest, ChatResult, Provider
from foureyes.llm.routes import Routes
from foureyes.risk.assess import Tier
from foureyes.risk.l0 import L0Gate
from foureyes.risk.result import RunPurpose
from foureyes.risk.triage import Triage, TriageRequest
from foureyes.store import Store

__all__ = [
    "CASE_DRAFT_ROUTE",
    "CaseAnswer",
    "FrozenDraft",
    "answer_case",
    "arm_config",
    "arm_routes",
    "runnable_arms",
]

CASE_DRAFT_ROUTE = "eval-case-draft"
"""The route name that serves a gate case's frozen draft as the Counselor."""

_GATE_FAILURES = frozenset(
    {
        ReasonCode.REVIEW_TIMEOUT,
        ReasonCode.REVIEW_FAILED,
        ReasonCode.REVIEW_MALFORMED,
        ReasonCode.DRAFT_FAILED,
        ReasonCode.DEADLINE_EXCEEDED,
        ReasonCode.BUDGET_EXHAUSTED,
    }
)


@dataclass(frozen=True, slots=True)
class CaseAnswer:
    """What an arm produced for a case, before scoring."""

    prediction: str | None
    """The label the arm's system gave (``None`` when it gave none)."""
    output: str
    """Text handed to a verifier."""
    failure: str | None = None
    """Why the system produced no usable answer (a reason code), when it did not."""
    cost_usd: float = 0.0
    """Model spend of the case."""
    calls: int = 0
    """Model calls made."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """Kind-specific facts (verdict, L1 and L2 levels, ...)."""


class FrozenDraft:
    """A provider whose every completion is the case's frozen draft."""

    def __init__(self, draft: str) -> None:
        """Answer every request with ``draft``."""
        self.route = CASE_DRAFT_ROUTE
        """The route served."""
        self._draft = draft

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        """The frozen draft, instantly and at no cost."""
        # A frozen draft is a whole answer: it finishes with a normal stop, as the
        # gate requires of every draft.
        return ChatResult(
            text=self._draft,
            finish_reason="stop",
            latency_s=0.0,
            route=self.route,
            model="frozen-draft",
            offline=True,
        )

    async def aclose(self) -> None:
        """Nothing to release."""


def arm_config(config: Config, arm: Arm) -> Config:
    """``config`` with the arm's roles-to-routes applied (validated like any config).

    Raises:
        pydantic.ValidationError: the arm names a role or route the config lacks.
    """
    roles = config.roles.model_validate(config.roles.model_dump() | arm.routes)
    return config.model_validate(config.model_dump() | {"roles": roles.model_dump()})


def arm_routes(config: Config, arms: Sequence[Arm]) -> set[str]:
    """Every route some role uses under some of ``arms``.

    Raises:
        SuiteError: an arm names a role or a route the config does not define.
    """
    used: set[str] = set()
    problems: list[str] = []
    for arm in arms:
        try:
            cfg = arm_config(config, arm)
        except ValidationError as exc:
            problems.append(f"arm {arm.name}: {exc.errors()[0]['msg']}")
            continue
        used |= {cfg.roles.route_for(role) for role in Role}
    if problems:
        raise SuiteError(problems)
    return used


def runnable_arms(config: Config, arms: Sequence[Arm]) -> tuple[list[Arm], dict[str, str]]:
    """The arms of ``arms`` that ``config``'s routes can run, and why each other cannot.

    An arm naming a route the config does not define (``supervisor-strong`` without a
    ``strong`` route, say) is left out, with the problem by its name.
    """
    runnable: list[Arm] = []
    missing: dict[str, str] = {}
    for arm in arms:
        try:
            arm_routes(config, [arm])
        except SuiteError as exc:
            missing[arm.name] = "; ".join(exc.problems)
            continue
        runnable.append(arm)
    return runnable, missing


async def answer_case(
    kind: SuiteKind,
    arm: Arm,
    case: Case,
    *,
    config: Config,
    providers: Mapping[str, Provider],
    store: Store,
    conversation_id: str,
) -> CaseAnswer:
    """Run ``case`` through the system as ``arm`` configures it.

    Raises:
        StoreError: the store failed (the pair is then not recorded).
        CassetteMiss: a replayed request is not in the cassette.
    """
    cfg = arm_config(config, arm)
    if kind is SuiteKind.GATE:
        return await _gate(arm, case, cfg, providers, store)
    return await _triage(arm, case, cfg, providers, store, conversation_id)


async def _gate(
    arm: Arm, case: Case, cfg: Config, providers: Mapping[str, Provider], store: Store
) -> CaseAnswer:
    draft = case.state.get("draft", "")
    if not arm.supervisor:
        ctx = RuleContext(max_chars=cfg.gate.max_chars, region=cfg.gate.region)
        findings = RuleCatalogue.from_config(cfg.gate).check(draft, ctx)
        return CaseAnswer(
            prediction="block" if findings else "pass",
            output=draft,
            detail={"rules": sorted({f.rule for f in findings})},
        )
    # The draft is frozen, so revising it could only repeat it: the arm judges it once.
    dump = cfg.model_dump()
    dump["routes"][CASE_DRAFT_ROUTE] = RouteConfig(kind="offline").model_dump()
    dump["roles"]["counselor"] = CASE_DRAFT_ROUTE
    dump["gate"]["max_revisions"] = 0
    gate_cfg = Config.model_validate(dump)
    routes = Routes(gate_cfg, {**providers, CASE_DRAFT_ROUTE: FrozenDraft(draft)})
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    runner = GateRunner(caller, traces=store.traces)
    locale = case.state.get("locale")
    outcome = await runner.reply(
        ReplyRequest.model_validate({"message": case.state.get("message", ""), "locale": locale}),
        purpose=RunPurpose.TEST,
    )
    usage = outcome.usage.values()
    failure = outcome.reason.value if outcome.reason in _GATE_FAILURES else None
    return CaseAnswer(
        prediction="pass" if outcome.decision is Outcome.RELEASED else "block",
        output=outcome.text,
        failure=failure,
        cost_usd=sum(u.cost_usd for u in usage),
        calls=sum(u.calls for u in usage if CASE_DRAFT_ROUTE not in u.routes),
        detail={"reason": outcome.reason.value, "trace_id": outcome.trace_id},
    )


async def _triage(
    arm: Arm,
    case: Case,
    cfg: Config,
    providers: Mapping[str, Provider],
    store: Store,
    conversation_id: str,
) -> CaseAnswer:
    routes = Routes(cfg, providers)
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    triage = Triage(cfg, caller, store.assessments, L0Gate.default())
    result = await triage.assess(
        TriageRequest(
            text=case.state.get("text", ""),
            conversation_id=conversation_id,
            purpose=RunPurpose.TEST,
        )
    )
    l1 = result.l1.level.value if result.l1 else None
    l2 = result.l2.level.value if result.l2 else None
    overall = result.level.value if result.level else None
    # A triage that stopped at L0 (nothing escalated) has the same level under every arm.
    level = overall if arm.l2 or result.tier is Tier.L0 else l1
    failure = None
    if level is None:
        failure = result.reasons[0].value if result.reasons else "no_level"
    return CaseAnswer(
        prediction=level,
        output=level or "",
        failure=failure,
        cost_usd=result.cost_usd,
        calls=result.calls,
        detail={"l1": l1, "l2": l2, "reasons": [r.value for r in result.reasons]},
    )
