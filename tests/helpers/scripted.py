"""A scripted stand-in provider: a real ``Provider`` that replays queued outputs and faults.

Tests queue, per role, what the "model" does on each call: answer a text, answer after a
delay (a timeout when the delay exceeds the call's timeout), answer cut off at the token
limit, raise a route error, or compute its answer from the request (a Supervisor echoing
the digest it was shown). The gate runs its production path against it: ``ModelCaller``,
the structured parser, the trace. Nothing of ours is mocked.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from foureyes.core.errors import RouteError, RouteTimeout
from foureyes.core.roles import Role
from foureyes.llm.provider import ChatRequest, ChatResult, Usage

__all__ = [
    "Reply",
    "Script",
    "ScriptedProvider",
    "approve",
    "insufficient",
    "reject",
    "verdict",
]


@dataclass(frozen=True)
class Reply:
    """One answer: its text, how it finished, and how long it takes."""

    text: str
    finish_reason: str = "stop"
    delay_s: float = 0.0
    usage: Usage = field(default_factory=Usage)


Script = str | Reply | RouteError | Callable[[ChatRequest], "str | Reply | Awaitable[str]"]
"""What one call does: a text, a :class:`Reply`, an error to raise, or a (sync or async)
function of the request."""


def verdict(
    decision: str,
    *,
    digest: str | None = None,
    violations: Sequence[dict[str, Any]] = (),
    missing: Sequence[str] = (),
) -> Callable[[ChatRequest], str]:
    """A Supervisor answer naming ``digest`` (by default the digest it was shown)."""

    def answer(request: ChatRequest) -> str:
        named = digest if digest is not None else request.subject["candidate_sha256"]
        return json.dumps(
            {
                "candidate_sha256": named,
                "decision": decision,
                "violations": list(violations),
                "missing": list(missing),
            }
        )

    return answer


def approve(*, digest: str | None = None) -> Callable[[ChatRequest], str]:
    """An approval of the digest shown (or of ``digest``)."""
    return verdict("approve", digest=digest)


def reject(rule: str = "dismissive", span: tuple[int, int] = (0, 1), note: str = "no") -> Any:
    """A rejection citing ``rule`` at ``span``."""
    return verdict("reject", violations=[{"rule": rule, "span": list(span), "note": note}])


def insufficient(*missing: str) -> Callable[[ChatRequest], str]:
    """An ``insufficient`` verdict listing ``missing``."""
    return verdict("insufficient", missing=missing or ("more context",))


class ScriptedProvider:
    """A provider whose every answer was queued by the test, per role, in order.

    A call with nothing queued for its role fails the test (``AssertionError``): the
    script, not the provider, decides what happens.
    """

    def __init__(self, route: str = "scripted", *, usage: Usage | None = None) -> None:
        self.route = route
        self.usage = usage or Usage()
        """Token usage reported by replies given as plain text."""
        self.requests: list[ChatRequest] = []
        self._queues: dict[Role | None, deque[Script]] = defaultdict(deque)
        self.closed = False

    def enqueue(self, role: Role, *items: Script) -> ScriptedProvider:
        """Queue what the next calls of ``role`` do."""
        self._queues[role].extend(items)
        return self

    def clear(self) -> None:
        """Drop everything still queued, for every role."""
        self._queues.clear()

    def pending(self, role: Role) -> int:
        """Items still queued for ``role``."""
        return len(self._queues[role])

    def calls(self, role: Role) -> list[ChatRequest]:
        """The requests received for ``role``, in order."""
        return [r for r in self.requests if r.role is role]

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        self.requests.append(request)
        queue = self._queues[request.role]
        if not queue:
            raise AssertionError(f"nothing scripted for role {request.role}")
        item = queue.popleft()
        if isinstance(item, RouteError):
            raise item
        if callable(item) and not isinstance(item, Reply):
            item = item(request)
            if inspect.isawaitable(item):
                item = await item
        reply = Reply(item, usage=self.usage) if isinstance(item, str) else item
        if reply.delay_s > timeout_s:
            await asyncio.sleep(timeout_s)
            raise RouteTimeout(self.route, timeout_s)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        return ChatResult(
            text=reply.text,
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            latency_s=reply.delay_s,
            route=self.route,
            model="scripted",
        )

    async def aclose(self) -> None:
        self.closed = True
