"""The offline engine: an honest, small, deterministic provider for the ``offline`` route.

It calls no model. Each role it can serve has a *responder*, a pure function from the
request to the answer text, registered with :func:`offline_responder`; capabilities
register theirs next to their own code. The engine itself ships only the Counselor's:
short supportive template replies in zh-Hans, zh-Hant and en, each opening with a marker
that says it is an offline automatic reply.

A role with no responder is a :class:`~foureyes.core.errors.RouteBadResponse`, so the
caller takes its fallback path: the engine never invents output for a role it cannot
serve (invariant 3).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from foureyes.config import RouteConfig
from foureyes.core.deadline import Clock
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import RouteBadResponse, RouteTimeout, UsageError
from foureyes.core.locale import Locale, detect_locale
from foureyes.core.roles import Role
from foureyes.llm.provider import ChatRequest, ChatResult, Usage

__all__ = [
    "OFFLINE_MODEL",
    "OfflineProvider",
    "Responder",
    "build_offline_provider",
    "offline_counselor_digests",
    "offline_responder",
    "offline_roles",
    "unregister_offline_responder",
]

OFFLINE_MODEL = "foureyes-offline"
"""The model name every offline result reports, whatever the route config says."""


class Responder(Protocol):
    """Answers one request for one role, deterministically: same request, same text.

    Any ``def respond(request: ChatRequest) -> str`` satisfies it.
    """

    def __call__(self, request: ChatRequest, /) -> str:
        """The answer text for ``request``.

        Raises:
            RouteBadResponse: a request it cannot answer honestly (for example, one
                missing the ``subject`` input it needs).
        """
        ...


_RESPONDERS: dict[Role, Responder] = {}


def offline_responder(role: Role) -> Callable[[Responder], Responder]:
    """Register the offline engine's responder for ``role`` (a decorator).

    Raises:
        UsageError: ``role`` already has a responder; two modules answering for one role
            is a bug, so nothing is silently replaced.
    """

    def register(responder: Responder) -> Responder:
        if role in _RESPONDERS:
            raise UsageError(f"the offline engine already has a responder for role {role}")
        _RESPONDERS[role] = responder
        return responder

    return register


def unregister_offline_responder(role: Role) -> Responder:
    """Remove the responder for ``role`` and return it (to restore it later).

    Raises:
        UsageError: ``role`` has no responder.
    """
    try:
        return _RESPONDERS.pop(role)
    except KeyError:
        raise UsageError(f"the offline engine has no responder for role {role}") from None


def offline_roles() -> frozenset[Role]:
    """The roles the offline engine can currently answer for."""
    return frozenset(_RESPONDERS)


class OfflineProvider:
    """The provider of an ``offline`` route: dispatches each request to its role's responder.

    Results have ``offline=True``, model :data:`OFFLINE_MODEL`, zero token usage and
    the measured latency. Responders run synchronously, in microseconds; a responder that
    takes longer than ``timeout_s`` still fails the call with ``RouteTimeout``, so the
    offline route keeps the same contract as a remote one.
    """

    def __init__(self, route: str, *, clock: Clock = time.perf_counter) -> None:
        """Serve route ``route``; ``clock`` measures latency (injectable for tests)."""
        self.route = route
        self._clock = clock
        self._closed = False

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        """Answer ``request`` with the responder registered for ``request.role``.

        Raises:
            RouteBadResponse: the request names no role, or its role has no responder
                (or the responder itself refused the request).
            RouteTimeout: the responder took longer than ``timeout_s``.
            UsageError: the provider was closed.
        """
        if self._closed:
            raise UsageError(f"offline provider of route {self.route!r} is closed")
        # A request without a role cannot be routed to a responder; guessing the
        # Counselor would put template text where some other contract was expected.
        if request.role is None:
            raise RouteBadResponse(self.route, "offline engine needs the request's role")
        responder = _RESPONDERS.get(request.role)
        if responder is None:
            raise RouteBadResponse(
                self.route, f"offline engine has no responder for role {request.role}"
            )
        started = self._clock()
        text = responder(request)
        latency_s = self._clock() - started
        if latency_s > timeout_s:
            raise RouteTimeout(self.route, timeout_s)
        return ChatResult(
            text=text,
            finish_reason="stop",
            usage=Usage(),
            latency_s=latency_s,
            route=self.route,
            model=OFFLINE_MODEL,
            offline=True,
        )

    async def aclose(self) -> None:
        """Mark the provider closed; it holds no connections."""
        self._closed = True

    def __repr__(self) -> str:
        return f"OfflineProvider(route={self.route!r})"


def build_offline_provider(
    name: str, route: RouteConfig, environ: Mapping[str, str]
) -> OfflineProvider:
    """Build the provider of an ``offline`` route (the ``offline`` route kind)."""
    return OfflineProvider(name)


class _CounselorTemplates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    marker: dict[Locale, str]
    replies: dict[Locale, tuple[str, ...]]

    @model_validator(mode="after")
    def _every_locale(self) -> _CounselorTemplates:
        for locale in Locale:
            if not self.marker.get(locale) or not self.replies.get(locale):
                raise ValueError(f"counselor templates lack locale {locale}")
        return self


@functools.cache
def _counselor_templates() -> _CounselorTemplates:
    data = resources.files("foureyes.llm").joinpath("offline_templates/counselor.json")
    return _CounselorTemplates.model_validate_json(data.read_text(encoding="utf-8"))


def _counselor_text(templates: _CounselorTemplates, locale: Locale, reply: str) -> str:
    # Chinese typography puts no space after the 【】 marker; English needs one.
    separator = " " if locale is Locale.EN else ""
    return f"{templates.marker[locale]}{separator}{reply}"


@functools.cache
def offline_counselor_digests() -> frozenset[str]:
    """The SHA-256 of every reply the offline Counselor can write.

    The set is finite (a marker and a template per locale), so the offline Supervisor can
    tell its own Counselor's text from a model's: it approves only these digests.
    """
    templates = _counselor_templates()
    return frozenset(
        sha256_hex(_counselor_text(templates, locale, reply))
        for locale in Locale
        for reply in templates.replies[locale]
    )


def _last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user" and message.text:
            return message.text
    return ""


@offline_responder(Role.COUNSELOR)
def _counselor_reply(request: ChatRequest) -> str:
    """A template reply in the language of the last user message.

    The template is picked by the message's SHA-256, so the same message always gets the
    same bytes. It never quotes the user, never gives a phone number and never claims to
    be therapy: crisis resources are the risk capability's job, not a template's.
    """
    # The gate may wrap the user's words in an English prompt; the subject carries them bare.
    message = request.subject.get("user_message") or _last_user_text(request)
    locale = detect_locale(message)
    templates = _counselor_templates()
    replies = templates.replies[locale]
    reply = replies[int(sha256_hex(message)[:16], 16) % len(replies)]
    return _counselor_text(templates, locale, reply)
