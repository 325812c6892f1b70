"""The selector call: a model chooses ``(kind, evidence_ref)`` pairs, and nothing else.

:class:`EvidenceSelector` asks the ``selector`` role's route, through the one metered
caller and the one structured-output parser, which records of a catalog support which
observation kinds. The task text and the records go into the prompt as data blocks
(docs/design.md 4, invariant 7); inadmissible records are not shown at all. The answer is
judged by :func:`~foureyes.evidence.contract.check_selections`, and the accepted
selections are rendered by code.

A user-facing explanation is a separate, optional call whose answer is typed
:class:`UserExplanation`: free model text that no code path writes as a fact.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from foureyes.core.digest import Proposal
from foureyes.core.errors import (
    BudgetExhausted,
    DeadlineExceeded,
    FoureyesError,
    RouteError,
    RouteTimeout,
)
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.evidence.catalog import Catalog
from foureyes.evidence.contract import Validation, check_selections
from foureyes.evidence.durable import Claim
from foureyes.evidence.kinds import KindRegistry
from foureyes.evidence.render import Observation
from foureyes.evidence.selection import SelectorOutput, requested_schema
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.prompting import DATA_RULE, data_block
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult
from foureyes.llm.structured import (
    ParseFailure,
    complete_structured,
    finish_failure,
    json_schema_format,
)

__all__ = [
    "EvidenceSelector",
    "PURPOSE_EXPLAIN",
    "PURPOSE_SELECT",
    "SELECTOR_FAILURES",
    "Selected",
    "SelectorFailed",
    "SelectorFailure",
    "UserExplanation",
    "explanation_request",
    "failure_for",
    "selection_request",
]

PURPOSE_SELECT = "select"
"""``subject["evidence_purpose"]`` of a selection request (read by the offline engine)."""
PURPOSE_EXPLAIN = "explain"
"""``subject["evidence_purpose"]`` of an explanation request."""

_LANGUAGES = {
    Locale.ZH_HANS: "Simplified Chinese",
    Locale.ZH_HANT: "Traditional Chinese",
    Locale.EN: "English",
}


class SelectorFailure(StrEnum):
    """Why a selector call produced no selections at all (wire strings)."""

    MALFORMED = "selector_malformed"
    """The answer broke the envelope contract, and so did the one retry."""
    TIMEOUT = "selector_timeout"
    """The route gave no answer in time."""
    FAILED = "selector_failed"
    """The route failed (connection, HTTP error, no responder)."""
    DEADLINE_EXCEEDED = "deadline_exceeded"
    """The run's deadline passed before the call could start."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """The run's call budget or a daily limit was used up."""


SELECTOR_FAILURES: Mapping[type[FoureyesError], SelectorFailure] = MappingProxyType(
    {
        DeadlineExceeded: SelectorFailure.DEADLINE_EXCEEDED,
        BudgetExhausted: SelectorFailure.BUDGET_EXHAUSTED,
        RouteTimeout: SelectorFailure.TIMEOUT,
        RouteError: SelectorFailure.FAILED,
    }
)
"""The errors a selector call expects, and the failure each becomes."""


def failure_for(error: FoureyesError) -> SelectorFailure | None:
    """The failure ``error`` becomes, most specific class first; ``None`` if unexpected."""
    for cls in type(error).__mro__:
        if cls in SELECTOR_FAILURES:
            return SELECTOR_FAILURES[cls]
    return None


@dataclass(frozen=True, slots=True)
class SelectorFailed:
    """A selector call that yielded nothing usable; nothing is selected (invariant 4)."""

    reason: SelectorFailure
    """Why."""
    detail: str = ""
    """Secret-free detail (the error's message, field paths of a broken answer)."""
    parse_failure: ParseFailure | None = None
    """For ``selector_malformed``: how the last answer broke the contract."""
    attempts: int = 0
    """Answers received before giving up (two for ``selector_malformed``)."""

    @property
    def ok(self) -> bool:
        """Always ``False``."""
        return False


@dataclass(frozen=True, slots=True)
class Selected:
    """A selector's answer, judged against the catalog it was shown."""

    proposal: Proposal[Any]
    """The parsed answer, bound to the SHA-256 of its canonical JSON."""
    snapshot_id: str
    """The snapshot shown."""
    catalog_sha256: str
    """Digest of the catalog shown."""
    locale: Locale
    """Locale the accepted selections were rendered in."""
    validation: Validation
    """Accepted (rendered) and rejected selections."""
    offline: bool
    """Whether the offline engine answered."""
    attempts: int
    """Calls made (two after a retry)."""

    @property
    def ok(self) -> bool:
        """Always ``True``."""
        return True

    @property
    def selections(self) -> tuple[Any, ...]:
        """The selections exactly as the model wrote them."""
        return tuple(self.proposal.content["selections"])

    def claim(self) -> Claim:
        """What to hand the durable owner: the raw selections and this side's rendering."""
        return Claim(
            snapshot_id=self.snapshot_id,
            catalog_sha256=self.catalog_sha256,
            locale=self.locale,
            selections=self.selections,
            rendered=self.validation.accepted,
        )


@dataclass(frozen=True, slots=True)
class UserExplanation:
    """Free text a model wrote for the user about recorded observations.

    It is unreviewed model prose: show it, if at all, through the application's own review
    (the release gate); it is never persisted as a fact (invariant 8).
    """

    text: str
    """The model's words."""
    offline: bool
    """Whether the offline engine wrote it (a fixed, honest template)."""


def _listing(catalog: Catalog) -> str:
    # Only admissible records are shown: the model cannot cite what it never saw, and a
    # record withheld for consent or retention stays withheld from the model too.
    lines = [
        json.dumps(
            {
                "ref": item.ref,
                "kind": item.kind,
                "value": item.value,
                "source": item.source,
                "observed_at": item.observed_at,
            },
            ensure_ascii=False,
            sort_keys=True,
        )
        for item in catalog.admissible
    ]
    return "\n".join(lines) or "(no records)"


def selection_request(catalog: Catalog, kinds: KindRegistry, *, task: str) -> ChatRequest:
    """The request asking the selector for selections over ``catalog``."""
    kind_lines = "\n".join(
        f"- {kind.name} ({kind.label[Locale.EN]}): may cite records of kind "
        + ", ".join(kind.sources)
        for kind in kinds
    )
    system = (
        "You are the evidence selector of an application that keeps records about a person. "
        "You never write facts: the application writes every fact itself, from its own "
        "records. Your only job is to choose which catalog records support which "
        "observation kinds.\n\n"
        f"Observation kinds:\n{kind_lines}\n\n"
        'Answer with only one JSON object of the form {"selections": [{"kind": "<kind>", '
        '"evidence_ref": "<ref>"}]}. Use only the kinds above and refs from the catalog; '
        "a kind may only cite records of the kinds listed for it; cite each record at most "
        "once. Add no other key anywhere: no label, description, reason, severity or text "
        'of your own. If nothing fits, answer {"selections": []}.\n\n' + DATA_RULE
    )
    if task.strip():
        task_part = "The task the selection serves:\n" + data_block("task", task)
    else:
        task_part = "No task was given: select every record that supports one of the kinds."
    user = f"{task_part}\n\nThe catalog, one record per line:\n" + data_block(
        "evidence_catalog", _listing(catalog)
    )
    offline_kinds = {kind.name: list(kind.sources) for kind in kinds}
    offline_items = [{"ref": i.ref, "kind": i.kind} for i in catalog.admissible]
    return ChatRequest(
        messages=(ChatMessage.system(system), ChatMessage.user(user)),
        role=Role.SELECTOR,
        temperature=0,
        response_format=json_schema_format(requested_schema(kinds)),
        subject={
            "evidence_purpose": PURPOSE_SELECT,
            "evidence_catalog": json.dumps(offline_items, ensure_ascii=False),
            "evidence_kinds": json.dumps(offline_kinds, ensure_ascii=False),
        },
    )


def explanation_request(
    observations: Sequence[Observation], *, task: str, locale: Locale
) -> ChatRequest:
    """The request asking for a short user-facing explanation of recorded observations."""
    system = (
        f"Write a short explanation, in {_LANGUAGES[locale]}, for the person these "
        "observations are about. The application recorded them from its own records; "
        "restate what they say in at most three plain sentences, and add no new facts, "
        "no diagnosis and no advice.\n\n" + DATA_RULE
    )
    listing = "\n".join(f"{o.label}: {o.description}" for o in observations) or "(none)"
    user = "Recorded observations:\n" + data_block("observations", listing)
    if task.strip():
        user += "\n\nThe task they were selected for:\n" + data_block("task", task)
    return ChatRequest(
        messages=(ChatMessage.system(system), ChatMessage.user(user)),
        role=Role.SELECTOR,
        subject={
            "evidence_purpose": PURPOSE_EXPLAIN,
            "observation_count": str(len(observations)),
            "locale": locale.value,
        },
    )


class EvidenceSelector:
    """Runs selector calls for one kinds registry through a :class:`ModelCaller`."""

    def __init__(self, caller: ModelCaller, kinds: KindRegistry) -> None:
        """Call models through ``caller``; judge and render with ``kinds``."""
        self.caller = caller
        self.kinds = kinds

    async def select(
        self, catalog: Catalog, scope: CallScope, *, task: str = "", locale: Locale = Locale.EN
    ) -> Selected | SelectorFailed:
        """Ask for selections over ``catalog``, judge them, and render the accepted ones.

        An answer that breaks the envelope contract is retried once; then the result is a
        :class:`SelectorFailed` with ``selector_malformed``. Route failures, the deadline
        and budgets become a :class:`SelectorFailed` with their own reasons.

        Raises:
            StoreError: the spend ledger or the trace could not be written.
        """
        request = selection_request(catalog, self.kinds, task=task)
        results: list[ChatResult] = []

        async def call(attempt: ChatRequest) -> ChatResult:
            result = await self.caller.call(Role.SELECTOR, attempt, scope, stage="select")
            results.append(result)
            return result

        try:
            outcome = await complete_structured(call, request, SelectorOutput, retries=1)
        except FoureyesError as exc:
            reason = failure_for(exc)
            if reason is None:
                raise
            return SelectorFailed(reason=reason, detail=str(exc), attempts=len(results))
        if not outcome.ok:
            return SelectorFailed(
                reason=SelectorFailure.MALFORMED,
                detail=str(outcome.error),
                parse_failure=outcome.reason,
                attempts=outcome.attempts,
            )
        last = outcome.calls[-1]
        proposal = Proposal.of_json(
            outcome.value.model_dump(mode="json"),
            role=Role.SELECTOR.value,
            route=last.route,
            offline=last.offline,
        )
        validation = check_selections(outcome.value.selections, catalog, self.kinds, locale)
        return Selected(
            proposal=proposal,
            snapshot_id=catalog.snapshot_id,
            catalog_sha256=catalog.sha256,
            locale=locale,
            validation=validation,
            offline=last.offline,
            attempts=outcome.attempts,
        )

    async def explain(
        self,
        observations: Sequence[Observation],
        scope: CallScope,
        *,
        task: str = "",
        locale: Locale = Locale.EN,
    ) -> UserExplanation | SelectorFailed:
        """Ask for a user-facing explanation of ``observations`` (one call, no retry).

        An empty answer, or one that did not complete normally
        (:func:`~foureyes.llm.structured.finish_failure`), is ``selector_malformed``.

        Raises:
            StoreError: the spend ledger or the trace could not be written.
        """
        request = explanation_request(observations, task=task, locale=locale)
        try:
            result = await self.caller.call(Role.SELECTOR, request, scope, stage="explain")
        except FoureyesError as exc:
            reason = failure_for(exc)
            if reason is None:
                raise
            return SelectorFailed(reason=reason, detail=str(exc))
        incomplete = finish_failure(result)
        if incomplete is not None or not result.text.strip():
            return SelectorFailed(
                reason=SelectorFailure.MALFORMED,
                detail=f"finish_reason is {result.finish_reason!r}",
                parse_failure=incomplete or ParseFailure.EMPTY,
                attempts=1,
            )
        return UserExplanation(text=result.text.strip(), offline=result.offline)
