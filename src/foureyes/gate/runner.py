"""The gate's run: draft, check, review, decide, record, then deliver.

:meth:`GateRunner.reply` runs one reply through the gate:

1. the Counselor drafts (unless the policy prohibits generation: then nothing is drafted);
2. the rules checked in code run on the draft; a hit skips the review;
3. the Supervisor reviews that exact draft, by digest, from an input the orchestrator
   assembled (:mod:`foureyes.gate.review_input`);
4. on a rejection (or a rule hit) the Counselor may revise, at most ``gate.max_revisions``
   times, each revision a new digest reviewed afresh, all within ``gate.deadline_s`` and
   ``gate.max_calls``;
5. :func:`~foureyes.gate.gate.decide` decides; the gate mints the
   :class:`~foureyes.gate.release.Release`; an ``insufficient`` verdict's missing items
   are kept on the conversation as open unknowns;
6. the decision record is appended to the trace (write-ahead, invariant 10), and only
   then is the release delivered and the outcome returned.

Every expected failure becomes a reason code through the stage tables of
:mod:`foureyes.gate.failures`; only store failures and bugs propagate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from foureyes.core.budget import CallBudget, utc_day
from foureyes.core.deadline import Clock, Deadline
from foureyes.core.digest import Proposal, sha256_hex
from foureyes.core.errors import FoureyesError, RouteTimeout
from foureyes.core.locale import Locale, detect_locale
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind, TraceEvent, TraceWriter
from foureyes.gate import offline as _offline  # noqa: F401  (registers the offline Supervisor)
from foureyes.gate._meter import Meter
from foureyes.gate.counselor import Revision, counselor_request, draft_reply
from foureyes.gate.failures import Stage, reason_for
from foureyes.gate.gate import Decision, decide
from foureyes.gate.outcome import Attempt, GateOutcome, decision_record
from foureyes.gate.release import compose_release, deliver
from foureyes.gate.request import OpenUnknowns, ReplyRequest
from foureyes.gate.review_input import assemble_review_input
from foureyes.gate.rules import RuleCatalogue, RuleContext
from foureyes.gate.supervisor import Review, review_candidate
from foureyes.gate.verdict import Verdict
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.risk.resources import ResourceRegistry, default_registry, stale_entries

__all__ = [
    "GateRunner",
    "RUN_KIND",
]

RUN_KIND = "gate_reply"
"""The trace ``kind`` of a run the gate starts itself."""

_log = logging.getLogger(__name__)
_MAX_ERROR = 500
# A revision needs a draft and a review; with fewer calls left it cannot be judged.
_CALLS_PER_ATTEMPT = 2


def _error_text(error: FoureyesError) -> str:
    return f"{type(error).__name__}: {error}"[:_MAX_ERROR]


def _usable_verdict(review: Review | None) -> Verdict | None:
    # A verdict naming other text is passed on, so decide() itself refuses the mismatch;
    # a verdict with unknown rules or spans outside the candidate is no verdict at all.
    if review is None or (review.problem is not None and review.problem.reason.is_review_failure):
        return None
    return review.verdict


class GateRunner:
    """Answers user messages through the gate: the one path from a model to a user.

    One instance serves a process; per-reply state lives in the run.
    """

    def __init__(
        self,
        caller: ModelCaller,
        *,
        traces: TraceWriter,
        unknowns: OpenUnknowns | None = None,
        registry: ResourceRegistry | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        """Use ``caller`` for model calls and its config's ``[gate]`` section.

        Args:
            caller: the metered model caller; its routes' config supplies ``[gate]``.
            traces: where runs and decision records are written.
            unknowns: where open unknowns are kept; without it they are not carried.
            registry: the crisis-resource registry (the packaged one by default).
            clock: the monotonic clock deadlines are measured with.

        Raises:
            ConfigError: ``gate.extra_rules`` redefines a built-in rule.
        """
        self._caller = caller
        self._gate = caller.routes.config.gate
        self._traces = traces
        self._unknowns = unknowns
        self._registry = registry or default_registry()
        self._clock = clock
        self.catalogue = RuleCatalogue.from_config(self._gate)
        """The rules in force."""
        self.stale_resources = stale_entries(
            self._registry, today=utc_day(), max_age_days=self._gate.resources_max_age_days
        )
        """Registry entries older than ``gate.resources_max_age_days``."""
        if self.stale_resources:
            _log.warning(
                "crisis resources not verified within %d days: %s",
                self._gate.resources_max_age_days,
                ", ".join(e.id for e in self.stale_resources),
            )

    async def reply(self, request: ReplyRequest, *, trace_id: str | None = None) -> GateOutcome:
        """Answer ``request``: the approved candidate, or a restricted fallback.

        Args:
            request: the message and what the gate needs to know about it.
            trace_id: a run already started (by the pipeline) to record into; without
                one the runner starts its own run and finishes it.

        Raises:
            StoreError: the trace or the ledger could not be written; nothing was delivered.
        """
        started = time.perf_counter()
        locale = request.locale or (
            detect_locale(request.message) if self._gate.locale == "auto" else self._gate.locale
        )
        region = request.region or self._gate.region
        own_run = trace_id is None
        if trace_id is None:
            trace_id = await self._traces.start_run(
                RUN_KIND,
                conversation_id=request.conversation_id,
                input_text=request.message,
                meta={"policy": request.policy.value, "locale": locale.value, "region": region},
            )
        run = _Run(self, request, trace_id, locale, region)
        attempts: list[Attempt] = []
        limit: ReasonCode | None = None
        candidate: Proposal[str] | None = None
        if request.policy.allows_generation:
            attempts, limit, candidate = await run.attempts()
        last = attempts[-1] if attempts else None
        decision = decide(
            request.policy,
            candidate_sha256=last.candidate_sha256 if last else None,
            findings=last.findings if last else (),
            verdict=_usable_verdict(last.review if last else None),
            failure=limit or (last.failure if last else None),
        )
        release = compose_release(
            decision,
            candidate.content if candidate is not None else None,
            policy=request.policy,
            locale=locale,
            region=region,
            registry=self._registry,
        )
        added = await run.keep_unknowns(release.decision, last)
        record = decision_record(
            release=release,
            attempts=attempts,
            context=run.context(added, self.catalogue, self.stale_resources),
            usage=run.meter.usage(),
            timings=run.meter.timings(time.perf_counter() - started),
            limits=run.limits(),
        )
        # Invariant 10: the decision record is durable before any text is handed over.
        await self._traces.append(trace_id, TraceEvent(EventKind.DECISION, "gate", record))
        delivery = deliver(release)
        if own_run:
            await self._traces.finish_run(
                trace_id, outcome=delivery.outcome.value, reason=delivery.reason.value
            )
        return GateOutcome(
            decision=delivery.outcome,
            reason=delivery.reason,
            candidate_sha256=delivery.candidate_sha256,
            delivered_sha256=delivery.sha256,
            text=delivery.text,
            trace_id=trace_id,
            verdict=last.review.verdict if last and last.review else None,
            rules_fired=last.findings if last else (),
            attempts=tuple(attempts),
            timings=run.meter.timings(time.perf_counter() - started),
            usage=run.meter.usage(),
            policy=request.policy,
            locale=locale,
            region=region,
        )


class _Run:
    """The state of one reply: its limits, its meter, what the review is based on."""

    def __init__(
        self,
        runner: GateRunner,
        request: ReplyRequest,
        trace_id: str,
        locale: Locale,
        region: str | None,
    ) -> None:
        gate = runner._gate
        self.runner = runner
        self.gate = gate
        self.request = request
        self.trace_id = trace_id
        self.locale = locale
        self.region = region
        self.scope = CallScope(
            Deadline.after(gate.deadline_s, clock=runner._clock),
            CallBudget(gate.max_calls),
            trace_id,
        )
        self.meter = Meter(runner._caller, self.scope)
        self.open_unknowns: tuple[str, ...] = ()
        self._unknowns_read: asyncio.Future[tuple[str, ...]] | None = None
        self.rules = RuleContext(max_chars=gate.max_chars, region=region, registry=runner._registry)

    async def attempts(self) -> tuple[list[Attempt], ReasonCode | None, Proposal[str] | None]:
        """Draft and judge, revising while allowed; the attempts, any limit hit, the last draft."""
        conversation = self.request.conversation_id
        if self.runner._unknowns is not None and conversation is not None:
            # Read while the Counselor drafts: only the review needs them.
            self._unknowns_read = asyncio.ensure_future(
                self.runner._unknowns.open(conversation, limit=self.gate.max_open_unknowns)
            )
        attempts: list[Attempt] = []
        revision: Revision | None = None
        candidate: Proposal[str] | None = None
        for n in range(self.gate.max_revisions + 1):
            attempt, candidate = await self._attempt(n, revision)
            attempts.append(attempt)
            retry = attempt.reason in (ReasonCode.REJECTED, ReasonCode.RULE_VIOLATION)
            if not retry or candidate is None or n == self.gate.max_revisions:
                break
            if self.scope.deadline.expired:
                return attempts, ReasonCode.DEADLINE_EXCEEDED, candidate
            if self.scope.budget.remaining < _CALLS_PER_ATTEMPT:
                return attempts, ReasonCode.BUDGET_EXHAUSTED, candidate
            revision = self._revision(attempt, candidate)
        return attempts, None, candidate

    @staticmethod
    def _revision(attempt: Attempt, candidate: Proposal[str]) -> Revision:
        violations = attempt.review.verdict.violations if attempt.review else ()
        broken = [f.rule for f in attempt.findings] + [v.rule for v in violations]
        return Revision(
            previous=candidate.content,
            broken=tuple(dict.fromkeys(broken)),
            notes=tuple(v.note for v in violations if v.note),
        )

    async def _attempt(
        self, n: int, revision: Revision | None
    ) -> tuple[Attempt, Proposal[str] | None]:
        try:
            request = counselor_request(
                self.request.message,
                self.request.history,
                catalogue=self.runner.catalogue,
                locale=self.locale,
                max_chars=self.gate.max_chars,
                history_turns=self.gate.counselor_turns,
                revision=revision,
            )
            candidate = await draft_reply(self.meter.call(Stage.DRAFT), request)
        except FoureyesError as exc:
            failure = reason_for(
                Stage.DRAFT, exc, deadline_passed=self._deadline_cut(exc, Role.COUNSELOR)
            )
            if failure is None:
                raise
            attempt = Attempt(
                revision=n,
                candidate_sha256=None,
                candidate_chars=None,
                draft_route=None,
                findings=(),
                review=None,
                failure=failure,
                error=_error_text(exc),
                reason=failure,
            )
            return attempt, None
        finally:
            await self._finish_unknowns_read()
        findings = self.runner.catalogue.check(candidate.content, self.rules)
        # Rules checked in code settle the candidate; a review would only spend a call.
        review, failure, error = (None, None, None) if findings else await self._review(candidate)
        decision = decide(
            self.request.policy,
            candidate_sha256=candidate.sha256,
            findings=findings,
            verdict=_usable_verdict(review),
            failure=failure,
        )
        attempt = Attempt(
            revision=n,
            candidate_sha256=candidate.sha256,
            candidate_chars=len(candidate.content),
            draft_route=candidate.route,
            findings=findings,
            review=review,
            failure=failure,
            error=error,
            reason=decision.reason,
        )
        return attempt, candidate

    def _deadline_cut(self, error: FoureyesError, role: Role) -> bool:
        """Whether the run's deadline, rather than the route, ended a failed call.

        A call's timeout is the route's, cut to the time the run has left; a timeout
        shorter than the route's own was the deadline's.
        """
        if self.scope.deadline.expired:
            return True
        _, route = self.runner._caller.routes.config.route_for(role)
        return isinstance(error, RouteTimeout) and error.timeout_s < route.timeout_s

    async def _finish_unknowns_read(self) -> None:
        """Take the open unknowns read during the first draft (once)."""
        if self._unknowns_read is not None:
            read, self._unknowns_read = self._unknowns_read, None
            self.open_unknowns = await read

    async def _review(
        self, candidate: Proposal[str]
    ) -> tuple[Review | None, ReasonCode | None, str | None]:
        """The review of ``candidate``: the review, a failure reason, and the error text."""
        review_input = assemble_review_input(
            message=self.request.message,
            history=self.request.history,
            candidate=candidate,
            sources=self.request.sources,
            open_unknowns=self.open_unknowns,
            counselor_summary=self.request.counselor_summary,
            history_turns=self.gate.history_turns,
        )
        try:
            review = await review_candidate(
                self.meter.call(Stage.REVIEW),
                review_input,
                self.runner.catalogue,
                region=self.region,
                max_chars=self.gate.max_chars,
                retries=self.gate.verdict_retries,
            )
        except FoureyesError as exc:
            failure = reason_for(
                Stage.REVIEW, exc, deadline_passed=self._deadline_cut(exc, Role.SUPERVISOR)
            )
            if failure is None:
                raise
            return None, failure, _error_text(exc)
        if review.problem is None:
            return review, None, None
        reason = review.problem.reason
        return review, reason if reason.is_review_failure else None, review.problem.detail

    async def keep_unknowns(self, decision: Decision, last: Attempt | None) -> tuple[str, ...]:
        """Keep an ``insufficient`` verdict's missing items open on the conversation."""
        conversation = self.request.conversation_id
        store = self.runner._unknowns
        if (
            decision.reason is not ReasonCode.INSUFFICIENT
            or last is None
            or last.review is None
            or store is None
            or conversation is None
        ):
            return ()
        missing = last.review.verdict.missing
        await store.add(conversation, missing, trace_id=self.trace_id)
        return missing

    def context(
        self, added: tuple[str, ...], catalogue: RuleCatalogue, stale: Sequence[Any]
    ) -> dict[str, Any]:
        """What the review was based on, for the decision record."""
        history = self.request.history
        shown = min(len(history), self.gate.history_turns)
        return {
            "earlier_turns_shown": shown,
            "earlier_turns_omitted": len(history) - shown,
            "sources": [
                {"id": s.id, "origin": s.origin, "sha256": sha256_hex(s.text)}
                for s in self.request.sources
            ],
            "open_unknowns": list(self.open_unknowns),
            "unknowns_added": list(added),
            "counselor_summary": self.request.counselor_summary is not None,
            "rules": sorted(catalogue.ids),
            "stale_resources": [entry.id for entry in stale],
        }

    def limits(self) -> dict[str, Any]:
        """The run's limits and what was used of them."""
        return {
            "deadline_s": self.gate.deadline_s,
            "elapsed_s": round(self.scope.deadline.elapsed(), 6),
            "max_calls": self.gate.max_calls,
            "calls_used": self.scope.budget.used,
            "max_revisions": self.gate.max_revisions,
        }
