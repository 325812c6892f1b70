"""The server's screen of a request refused for invalid text; the text types are the wire's.

Every text field of a request is one of the types of :mod:`foureyes.wire.text` (no
unpaired surrogate, no NUL: a 422 ``invalid_text`` naming the field). A request refused
so still has its people's words screened: besides the refused message texts, the user
messages of a gateway or assessment body (the readable ones too) are screened with L0
(:func:`screen_refused_text`, the app's :data:`~foureyes.server.errors.TextScreen`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fastapi import Request

from foureyes.core.locale import Locale
from foureyes.risk.l0 import L0Gate
from foureyes.wire.text import crisis_resources

__all__ = ["screen_refused_text"]

_REGION = re.compile(r"[A-Z]{2}")


def _requested(body: Any) -> tuple[str | None, Locale | None]:
    """The region and locale a refused body asked for, where they are valid.

    The body failed validation, so it is read as plain JSON: the gateway's
    ``foureyes.region`` / ``foureyes.locale``, or a top-level ``region`` (``/v1/assess``).
    """
    region: str | None = None
    locale: Locale | None = None
    for place in (body, body.get("foureyes") if isinstance(body, dict) else None):
        if not isinstance(place, dict):
            continue
        asked = place.get("region")
        if isinstance(asked, str) and _REGION.fullmatch(asked):
            region = asked
        named = place.get("locale")
        if isinstance(named, str) and named in Locale.__members__.values():
            locale = Locale(named)
    return region, locale


_SCREENED_PATHS = frozenset({"/v1/chat/completions", "/v1/check", "/v1/check/stream", "/v1/assess"})
"""The endpoints whose body carries a person's messages (the gateway's, and triage's)."""


def _user_texts(body: Any) -> list[str]:
    """The user messages' texts of a refused gateway or assessment body, read as JSON.

    ``messages[].content`` (a string or text parts) of ``user`` messages, and an
    assessment's ``text`` and the ``text`` of its ``user`` history turns.
    """
    if not isinstance(body, dict):
        return []
    texts: list[str] = []
    if isinstance(body.get("text"), str):
        texts.append(body["text"])
    for key, field in (("messages", "content"), ("history", "text")):
        turns = body.get(key)
        for turn in turns if isinstance(turns, list) else ():
            if not isinstance(turn, dict) or turn.get("role") != "user":
                continue
            content = turn.get(field)
            parts = content if isinstance(content, list) else [{"text": content}]
            texts += [
                p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
    return texts


def screen_refused_text(request: Request, texts: Sequence[str], body: Any) -> str | None:
    """The :data:`~foureyes.server.errors.TextScreen` of the app: the service's L0 gate.

    It screens ``texts`` (the refused message texts) and, on the gateway's and
    ``/v1/assess``' bodies, the user messages the body holds (a request refused for
    another field's text still carries a person's words). Region and locale are the
    request's when it named valid ones, else ``[gate]``'s (a fixed ``gate.locale``, or
    the text's language under ``auto``).
    """
    service = getattr(request.app.state, "service", None)
    if service is None:  # not started: nothing to screen with
        return None
    if request.url.path in _SCREENED_PATHS:
        texts = [*texts, *_user_texts(body)]
    if not texts:
        return None
    gate = service.config.gate
    region, locale = _requested(body)
    if locale is None and gate.locale != "auto":
        locale = Locale(gate.locale)
    screening: L0Gate = service.l0
    return crisis_resources(
        screening,
        texts,
        locale=locale,
        region=region or gate.region,
        registry=service.pipeline.registry,
    )
