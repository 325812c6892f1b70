"""The Counselor's stage: the drafting prompt and the call that turns a draft into a proposal.

The Counselor has no path to the user: what it writes becomes a text
:class:`~foureyes.core.digest.Proposal` bound to the SHA-256 of its exact text, and only
the gate decides what happens to it. The user's words, earlier turns and, on a revision,
the rejected draft and the reviewer's notes go into the prompt as data (invariant 7), and
so do the conversation's open unknowns, so a draft (and each revision) knows what an
earlier review could not judge yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from foureyes.core.digest import Proposal
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.gate._prompts import (
    LANGUAGE_NAMES,
    NONE,
    rule_line,
    system_prompt,
    template,
    unknowns_list,
)
from foureyes.gate.review_input import Turn
from foureyes.gate.rules import RuleCatalogue
from foureyes.llm.prompting import DATA_RULE, data_block
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.structured import ChatCall, check_finished

__all__ = ["DRAFT_SCHEMA", "Revision", "counselor_request", "draft_reply"]

DRAFT_SCHEMA = "CounselorDraft"
"""The contract name a failed draft's :class:`~foureyes.core.errors.ContractError` carries."""


@dataclass(frozen=True, slots=True)
class Revision:
    """What a revision is asked to fix."""

    previous: str
    """The draft that was not approved."""
    broken: tuple[str, ...]
    """Ids of the rules it broke (from the rules checked in code or the verdict)."""
    notes: tuple[str, ...]
    """The reviewer's notes, model-written, passed on as data."""


def counselor_request(
    message: str,
    history: Sequence[Turn],
    *,
    catalogue: RuleCatalogue,
    locale: Locale,
    max_chars: int,
    history_turns: int,
    revision: Revision | None = None,
    open_unknowns: Sequence[str | None] = (),
) -> ChatRequest:
    """The drafting request for the user's current ``message``.

    ``open_unknowns`` are the conversation's (``None`` for one whose words are not kept).
    Its ``subject`` carries the user's words bare for the offline Counselor.
    """
    earlier = tuple(history[-history_turns:]) if history_turns else ()
    system = system_prompt(
        "counselor_system",
        catalogue,
        language=LANGUAGE_NAMES[locale],
        max_chars=max_chars,
        data_rule=DATA_RULE,
    )
    revision_text = ""
    if revision is not None:
        described = [catalogue.get(rule) for rule in revision.broken]
        revision_text = template("counselor_revision").substitute(
            broken="\n".join(rule_line(rule) for rule in described if rule),
            notes="\n".join(data_block("reviewer_note", note) for note in revision.notes) or NONE,
            previous=data_block("previous_draft", revision.previous),
        )
    user = template("counselor_user").substitute(
        earlier="\n".join(data_block("earlier_turn", t.text, role=t.role) for t in earlier) or NONE,
        unknowns=unknowns_list(open_unknowns),
        message=data_block("user_message", message),
        revision=revision_text,
    )
    return ChatRequest(
        messages=(ChatMessage.system(system), ChatMessage.user(user)),
        role=Role.COUNSELOR,
        subject={"user_message": message},
    )


async def draft_reply(call: ChatCall, request: ChatRequest) -> Proposal[str]:
    """Have the Counselor draft, and bind the draft to its digest.

    Surrounding whitespace is trimmed before the digest is taken, so the digest names
    exactly the text that would be delivered. An empty draft is still a proposal: rule
    ``empty_text`` refuses it like any other candidate.

    Raises:
        ContractError: the draft did not complete normally (cut off at the token limit,
            stopped by a content filter, calling tools, no finish reason): a reply that
            stops mid-sentence, or whose rest a filter withheld, is no reply.
        RouteError: the Counselor's route failed.
        LimitExceeded: the run's deadline or budget stopped the call.
    """
    result = await call(request)
    check_finished(result, DRAFT_SCHEMA)
    return Proposal.of_text(
        result.text.strip(),
        role=Role.COUNSELOR.value,
        route=result.route,
        model=result.model,
        offline=result.offline,
    )
