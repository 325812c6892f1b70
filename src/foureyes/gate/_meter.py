"""Counting one run's model calls per role: calls, time, tokens, cost."""

from __future__ import annotations

import time
from collections import defaultdict

from foureyes.core.budget import cost_usd
from foureyes.core.roles import Role
from foureyes.gate.failures import Stage
from foureyes.gate.outcome import RoleUsage, Timings
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.provider import ChatRequest, ChatResult, TextDelta
from foureyes.llm.structured import ChatCall

__all__ = ["Meter"]

_ROLE_OF = {Stage.DRAFT: Role.COUNSELOR, Stage.REVIEW: Role.SUPERVISOR}


class Meter:
    """Wraps :meth:`ModelCaller.call` for one run and adds up what each role used."""

    def __init__(self, caller: ModelCaller, scope: CallScope) -> None:
        self._caller = caller
        self._scope = scope
        self._calls: dict[Role, int] = defaultdict(int)
        self._seconds: dict[Role, float] = defaultdict(float)
        self._prompt: dict[Role, int] = defaultdict(int)
        self._completion: dict[Role, int] = defaultdict(int)
        self._cost: dict[Role, float] = defaultdict(float)
        self._routes: dict[Role, dict[str, None]] = defaultdict(dict)

    def call(self, stage: Stage, *, on_text: TextDelta | None = None) -> ChatCall:
        """The call function of ``stage``'s role, within the run's scope, metered.

        With ``on_text`` the call streams its text into it (:meth:`ModelCaller.call`).
        """
        role = _ROLE_OF[stage]

        async def call(request: ChatRequest) -> ChatResult:
            self._calls[role] += 1
            started = time.perf_counter()
            try:
                result = await self._caller.call(
                    role, request, self._scope, stage=stage.value, on_text=on_text
                )
            finally:
                self._seconds[role] += time.perf_counter() - started
            _, route = self._caller.routes.config.route_for(role)
            self._prompt[role] += result.usage.prompt_tokens
            self._completion[role] += result.usage.completion_tokens
            self._cost[role] += cost_usd(
                result.usage.prompt_tokens,
                result.usage.completion_tokens,
                price_in=route.price_in or 0.0,
                price_out=route.price_out or 0.0,
            )
            self._routes[role][result.route] = None
            return result

        return call

    def usage(self) -> dict[Role, RoleUsage]:
        """What each role that was called used."""
        return {
            role: RoleUsage(
                calls=self._calls[role],
                model_ms=self._seconds[role] * 1000,
                prompt_tokens=self._prompt[role],
                completion_tokens=self._completion[role],
                cost_usd=self._cost[role],
                routes=tuple(self._routes[role]),
            )
            for role in sorted(self._calls)
        }

    def timings(self, total_s: float) -> Timings:
        """The run's time split between model calls and the gate's own work."""
        model_s = sum(self._seconds.values())
        return Timings(
            total_ms=total_s * 1000, model_ms=model_s * 1000, gate_ms=(total_s - model_s) * 1000
        )
