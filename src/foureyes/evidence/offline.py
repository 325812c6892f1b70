"""The offline selector: rules only, honest and deterministic.

Registered with the offline engine when :mod:`foureyes.evidence` is imported. With no
model there is no judgement of relevance, so it does the one thing rules can: it cites
every admissible record shown to it under the first kind (by name) that may cite that
record's source kind, and ignores the task. It reads the records and kinds from
``request.subject`` (never from the prompt), so its answer does not depend on wording.

Its explanation is a fixed template per locale that says it is an offline automatic
note and only counts the observations; it adds no words about the person.
"""

from __future__ import annotations

import json
from typing import Any

from foureyes.config import OFFLINE_ROUTE
from foureyes.core.errors import RouteBadResponse
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.evidence.selector import PURPOSE_EXPLAIN, PURPOSE_SELECT
from foureyes.llm.offline import offline_responder
from foureyes.llm.provider import ChatRequest

__all__ = ["offline_explanation", "offline_selection", "offline_selector"]

_EXPLANATIONS = {
    Locale.ZH_HANS: (
        "【离线自动说明】系统依据来源记录整理了 {count} 条观察，内容均由程序按记录生成。"
    ),
    Locale.ZH_HANT: (
        "【離線自動說明】系統依據來源記錄整理了 {count} 條觀察，內容均由程式按記錄生成。"
    ),
    Locale.EN: (
        "[Offline automatic note] The system recorded {count} observation(s), each written "
        "by code from the source records."
    ),
}


def _decoded(request: ChatRequest, key: str) -> Any:
    raw = request.subject.get(key)
    if raw is None:
        raise RouteBadResponse(OFFLINE_ROUTE, f"the offline selector needs subject[{key!r}]")
    try:
        return json.loads(raw)
    except ValueError:
        raise RouteBadResponse(OFFLINE_ROUTE, f"subject[{key!r}] is not JSON") from None


def _strings(*values: object) -> bool:
    return all(isinstance(v, str) for v in values)


def offline_selection(request: ChatRequest) -> str:
    """The selection, as JSON, of every shown record some kind may cite.

    Reads ``evidence_catalog`` (a JSON list of ``{"ref", "kind"}``, admissible records
    only) and ``evidence_kinds`` (a JSON object of kind name to source kinds).

    Raises:
        RouteBadResponse: either input is missing or malformed; nothing is guessed.
    """
    items, kinds = _decoded(request, "evidence_catalog"), _decoded(request, "evidence_kinds")
    if not (
        isinstance(items, list)
        and all(isinstance(i, dict) and _strings(i.get("ref"), i.get("kind")) for i in items)
        and isinstance(kinds, dict)
        and all(isinstance(s, list) and _strings(*s) for s in kinds.values())
    ):
        raise RouteBadResponse(OFFLINE_ROUTE, "the offline selector's inputs have wrong shapes")
    citing: dict[str, str] = {}
    for name in sorted(kinds, reverse=True):
        for source_kind in kinds[name]:
            citing[source_kind] = name  # the last write is the first name in sorted order
    selections = [
        {"kind": citing[item["kind"]], "evidence_ref": item["ref"]}
        for item in items
        if item["kind"] in citing
    ]
    return json.dumps({"selections": selections}, ensure_ascii=False)


def offline_explanation(request: ChatRequest) -> str:
    """The fixed offline note for ``observation_count`` observations in ``locale``.

    Raises:
        RouteBadResponse: the count or the locale is missing or malformed.
    """
    count, locale = request.subject.get("observation_count", ""), request.subject.get("locale")
    if not count.isdigit() or locale not in set(Locale):
        raise RouteBadResponse(OFFLINE_ROUTE, "the offline explanation needs a count and locale")
    return _EXPLANATIONS[Locale(locale)].format(count=int(count))


@offline_responder(Role.SELECTOR)
def offline_selector(request: ChatRequest) -> str:
    """Answer a selector request offline: a selection, or an explanation.

    Raises:
        RouteBadResponse: the request says neither (``subject["evidence_purpose"]``).
    """
    purpose = request.subject.get("evidence_purpose")
    if purpose == PURPOSE_SELECT:
        return offline_selection(request)
    if purpose == PURPOSE_EXPLAIN:
        return offline_explanation(request)
    raise RouteBadResponse(OFFLINE_ROUTE, "the offline selector needs subject['evidence_purpose']")
