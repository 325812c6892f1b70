"""One traced facts run: select, judge, render, commit, and optionally explain.

:func:`select_facts` is what the CLI and the HTTP endpoint call. It records one trace run
(kind ``facts``): the selector's calls, its proposal by digest, the owner's decision, and
the outcome. The selector's side judges and renders on the catalog it was given; the
durable owner then redoes everything from its own source before anything is persisted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Deadline
from foureyes.core.errors import StoreError
from foureyes.core.locale import Locale
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.core.trace import EventKind, TraceEvent, TraceWriter
from foureyes.evidence.catalog import Catalog
from foureyes.evidence.durable import CommitResult, CommitStatus, Owner
from foureyes.evidence.render import RENDERER_VERSION
from foureyes.evidence.selector import (
    EvidenceSelector,
    Selected,
    SelectorFailed,
    SelectorFailure,
    UserExplanation,
)
from foureyes.llm.calls import CallScope

__all__ = ["FactsOutcome", "FactsRequest", "TRACE_KIND", "select_facts"]

TRACE_KIND = "facts"
"""The kind of the trace run a facts run records."""


class FactsRequest(BaseModel):
    """What one facts run is asked to do."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    subject: str = Field(min_length=1, max_length=256)
    """Whom the observations are about."""
    tenant: str = Field(default=LOCAL_TENANT, min_length=1, max_length=128)
    """Who asks: the observations are written as this tenant's (the server passes the
    API key's tenant; a local caller the default)."""
    task: str = Field(default="", max_length=20_000)
    """What the selection serves (shown to the selector as data)."""
    locale: Locale = Locale.ZH_HANS
    """Locale the observations are rendered in."""
    explain: bool = False
    """Also ask for a user-facing explanation (free model text, never persisted)."""
    deadline_s: float = Field(default=60.0, gt=0, le=600)
    """Deadline of the run's model calls."""
    max_calls: int = Field(default=3, ge=1, le=10)
    """Model calls the run may make (a selection, its retry, an explanation)."""


@dataclass(frozen=True, slots=True)
class FactsOutcome:
    """How a facts run ended: the selector's answer, the owner's commit, the explanation."""

    status: CommitStatus | SelectorFailure
    """The commit's status, or why the selector gave nothing to commit."""
    request: FactsRequest
    """What was asked."""
    catalog: Catalog
    """The catalog the selector was shown."""
    selection: Selected | SelectorFailed
    """The judged selection, or why there was none."""
    commit: CommitResult | None
    """The owner's commit (``None`` when the selector failed)."""
    explanation: UserExplanation | SelectorFailed | None = None
    """The explanation, why it failed, or ``None`` when not asked for (or nothing was
    committed)."""
    trace_id: str | None = None
    """The run's trace, when traced."""

    @property
    def ok(self) -> bool:
        """Whether the selections were judged and the commit went through."""
        return self.status is CommitStatus.COMMITTED

    def to_json(self) -> dict[str, Any]:
        """The run as JSON, ``accepted`` and ``rejected`` in their pinned shapes.

        The explanation stands apart, marked as model text that was not persisted.
        """
        body: dict[str, Any] = {
            "ok": self.ok,
            "status": self.status.value,
            "subject": self.request.subject,
            "snapshot_id": self.catalog.snapshot_id,
            "catalog_sha256": self.catalog.sha256,
            "locale": self.request.locale.value,
            "renderer_version": RENDERER_VERSION,
            "trace_id": self.trace_id,
            "commit_id": None,
            "accepted": [],
            "rejected": [],
            "detail": "",
            "explanation": None,
        }
        if isinstance(self.selection, SelectorFailed):
            body["detail"] = self.selection.detail
            body["selector"] = {
                "reason": self.selection.reason.value,
                "parse_failure": self.selection.parse_failure,
                "attempts": self.selection.attempts,
            }
            return body
        body["selector"] = {
            "proposal_sha256": self.selection.proposal.sha256,
            "offline": self.selection.offline,
            "attempts": self.selection.attempts,
        }
        if self.commit is not None:
            commit = self.commit.to_json()
            body |= {k: commit[k] for k in ("commit_id", "accepted", "rejected", "detail")}
            body["catalog_sha256_at_commit"] = commit["catalog_sha256"]
        if isinstance(self.explanation, UserExplanation):
            body["explanation"] = {
                "text": self.explanation.text,
                "offline": self.explanation.offline,
                "model_written": True,
                "persisted": False,
            }
        elif isinstance(self.explanation, SelectorFailed):
            body["explanation_error"] = self.explanation.reason.value
        return body


async def select_facts(
    catalog: Catalog,
    request: FactsRequest,
    *,
    selector: EvidenceSelector,
    owner: Owner,
    traces: TraceWriter | None = None,
) -> FactsOutcome:
    """Run the selector over ``catalog``, then have ``owner`` commit what it accepts.

    Args:
        catalog: the catalog the selector is shown, built by the application.
        request: subject, task, locale, explanation and limits.
        selector: the selector side (model calls, judgement, rendering).
        owner: the durable owner, which rebuilds the catalog from its own source.
        traces: where the run is recorded; ``None`` records nothing.

    Returns:
        A :class:`FactsOutcome`; expected failures (selector failures, refused commits)
        are data in it.

    Raises:
        StoreError: the store failed; the trace records it when it still can, and the
            commit persisted nothing.
    """
    trace_id = None
    if traces is not None:
        trace_id = await traces.start_run(
            TRACE_KIND,
            input_text=request.task or None,
            meta={
                "subject": request.subject,
                "tenant": request.tenant,
                "snapshot_id": catalog.snapshot_id,
                "catalog_sha256": catalog.sha256,
                "kinds_sha256": selector.kinds.sha256,
                "locale": request.locale.value,
            },
        )
    recorder = _Recorder(traces, trace_id)
    scope = CallScope(Deadline.after(request.deadline_s), CallBudget(request.max_calls), trace_id)
    selection = await selector.select(catalog, scope, task=request.task, locale=request.locale)
    if isinstance(selection, SelectorFailed):
        await recorder.event(EventKind.ERROR, "select", {"reason": selection.reason.value})
        await recorder.finish("failed", selection.reason.value)
        return FactsOutcome(selection.reason, request, catalog, selection, None, trace_id=trace_id)
    await recorder.event(
        EventKind.PROPOSAL,
        "select",
        {
            "role": selection.proposal.role,
            "sha256": selection.proposal.sha256,
            "selections": len(selection.selections),
            "offline": selection.offline,
        },
    )
    try:
        commit = await owner.commit(
            request.subject, selection.claim(), tenant=request.tenant, trace_id=trace_id
        )
    except StoreError as exc:
        await recorder.event(EventKind.ERROR, "commit", {"error": exc.operation})
        await recorder.finish("failed", "store_error")
        raise
    await recorder.event(
        EventKind.DECISION,
        "commit",
        {
            "status": commit.status.value,
            "accepted": [o.evidence_ref for o in commit.accepted],
            "rejected": [{"index": r.index, "reason": r.reason.value} for r in commit.rejected],
            "commit_id": commit.commit_id,
            "catalog_sha256": commit.catalog_sha256,
        },
    )
    explanation = None
    if request.explain and commit.ok and commit.accepted:
        explanation = await selector.explain(
            commit.accepted, scope, task=request.task, locale=request.locale
        )
    await recorder.finish(commit.status.value, None if commit.ok else commit.status.value)
    return FactsOutcome(commit.status, request, catalog, selection, commit, explanation, trace_id)


@dataclass(frozen=True, slots=True)
class _Recorder:
    traces: TraceWriter | None
    trace_id: str | None

    async def event(self, kind: EventKind, stage: str, data: dict[str, Any]) -> None:
        if self.traces is not None and self.trace_id is not None:
            await self.traces.append(self.trace_id, TraceEvent(kind=kind, stage=stage, data=data))

    async def finish(self, outcome: str, reason: str | None) -> None:
        if self.traces is not None and self.trace_id is not None:
            await self.traces.finish_run(self.trace_id, outcome=outcome, reason=reason)
