"""The one way a capability calls a model: deadline, call budget, spend ledger and trace.

Every model call in foureyes goes through :meth:`ModelCaller.call`, which

1. takes the call's timeout from the run's deadline (``min(route timeout, time left)``),
2. takes one call from the run's :class:`~foureyes.core.budget.CallBudget`,
3. reserves worst-case room in the persistent spend ledger for the route's daily limits
   (and any named limits the caller adds); a role other than ``risk_l1``/``risk_l2`` on a
   route a crisis role also uses reserves against ``route:NAME:non_crisis`` too, which
   holds ``1 - [risk] reserved_share`` of the route's limits, so the crisis roles always
   keep their share,
4. calls the route's provider,
5. commits what the call used, or releases the room when the call never started,
6. appends one ``model_call`` event to the run's trace,

all inside one OpenTelemetry span (:mod:`foureyes.llm.telemetry`).

Limits raise before the provider is touched, so an exhausted budget costs nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from foureyes.config import RouteConfig
from foureyes.core.budget import CallBudget, Reservation, SpendLedger, SpendLimit, cost_usd
from foureyes.core.deadline import Deadline
from foureyes.core.errors import RouteConnectionError, RouteError, RouteTimeout
from foureyes.core.roles import CRISIS_ROLES, Role
from foureyes.core.trace import EventKind, TraceEvent, TraceWriter
from foureyes.llm import telemetry
from foureyes.llm.provider import ChatRequest, ChatResult, StreamingProvider, TextDelta
from foureyes.llm.routes import Routes

__all__ = ["CallScope", "ModelCaller", "non_crisis_limit", "route_limit"]


def route_limit(
    name: str, *, daily_calls: int | None, daily_budget_usd: float | None
) -> SpendLimit:
    """The ledger limit of route ``name``."""
    return SpendLimit(key=f"route:{name}", max_calls=daily_calls, max_usd=daily_budget_usd)


def non_crisis_limit(name: str, route: RouteConfig, reserved_share: float) -> SpendLimit | None:
    """The ledger limit of the non-crisis roles on route ``name``, shared with a crisis role.

    They may use ``daily_calls`` less ``ceil(daily_calls * reserved_share)`` calls and
    ``(1 - reserved_share)`` of ``daily_budget_usd``; ``None`` when nothing is reserved.
    """
    if reserved_share <= 0 or (route.daily_calls is None and route.daily_budget_usd is None):
        return None
    # Exact arithmetic on the share as written, so 10 calls at 0.2 keep exactly 2.
    share = Fraction(str(reserved_share))
    calls = route.daily_calls
    return SpendLimit(
        key=f"route:{name}:non_crisis",
        max_calls=None if calls is None else calls - math.ceil(calls * share),
        max_usd=None
        if route.daily_budget_usd is None
        else route.daily_budget_usd * float(1 - share),
    )


@dataclass(frozen=True, slots=True)
class CallScope:
    """What bounds the calls of one run: its deadline, its call budget and its trace."""

    deadline: Deadline
    """No call starts after it; each call's timeout is cut to the time left."""
    budget: CallBudget
    """Calls the run may still make."""
    trace_id: str | None = None
    """Run to record ``model_call`` events in; ``None`` records nothing."""


class ModelCaller:
    """Calls the route of a role within a run's limits and records the call.

    One instance serves a whole process; per-run state lives in the :class:`CallScope`.
    """

    def __init__(
        self,
        routes: Routes,
        *,
        ledger: SpendLedger | None = None,
        trace: TraceWriter | None = None,
    ) -> None:
        """Use ``routes`` for providers, ``ledger`` for daily limits, ``trace`` for records."""
        self.routes = routes
        self.ledger = ledger
        self.trace = trace
        self._shared_with_crisis = frozenset(routes.config.crisis_shared_routes())

    async def call(
        self,
        role: Role,
        request: ChatRequest,
        scope: CallScope,
        *,
        stage: str,
        limits: Sequence[SpendLimit] = (),
        on_text: TextDelta | None = None,
    ) -> ChatResult:
        """Complete ``request`` on the route serving ``role``.

        With ``on_text`` the completion is streamed: each piece of its text is passed to
        ``on_text`` as it arrives (a provider that cannot stream passes the whole text
        once it has it). Deadline, budget, ledger and trace are the same either way.

        Args:
            role: the role calling; selects the route.
            request: the chat request (its ``role`` is set to ``role`` if unset).
            scope: the run's deadline, call budget and trace id.
            stage: pipeline stage recorded in the trace (``draft``, ``review``, ...).
            limits: extra named daily limits to reserve against (e.g. per conversation).
            on_text: called with each piece of the text as it is streamed.

        Raises:
            DeadlineExceeded: the run's deadline has passed; nothing was called.
            BudgetExhausted: the run's call budget or a daily limit is used up.
            RouteError: the provider failed (recorded in the trace first).
            StoreError: the ledger could not be read or written.
        """
        route_name = self.routes.config.roles.route_for(role)
        route_cfg, provider = self.routes.for_role(role)
        if request.role is None:
            request = request.model_copy(update={"role": role})
        timeout_s = scope.deadline.timeout_for(route_cfg.timeout_s)
        scope.budget.take()
        all_limits = [
            route_limit(
                route_name,
                daily_calls=route_cfg.daily_calls,
                daily_budget_usd=route_cfg.daily_budget_usd,
            ),
            *limits,
        ]
        if role not in CRISIS_ROLES and route_name in self._shared_with_crisis:
            share = non_crisis_limit(route_name, route_cfg, self.routes.config.risk.reserved_share)
            if share is not None:
                all_limits.append(share)
        worst_usd = _worst_case_usd(
            request, route_cfg.max_tokens, route_cfg.price_in, route_cfg.price_out
        )
        reservations = await self._reserve(all_limits, worst_usd)
        started = time.monotonic()
        result: ChatResult | None = None
        error: RouteError | None = None
        with telemetry.model_call_span(
            role=role, route_name=route_name, route=route_cfg, stage=stage, request=request
        ) as span:
            try:
                if on_text is None:
                    result = await provider.complete(request, timeout_s=timeout_s)
                elif isinstance(provider, StreamingProvider):
                    result = await provider.complete_streaming(
                        request, timeout_s=timeout_s, on_text=on_text
                    )
                else:
                    result = await provider.complete(request, timeout_s=timeout_s)
                    on_text(result.text)
                span.succeeded(result)
                return result
            except RouteError as exc:
                error = exc
                raise
            finally:
                # Neither a result nor a route error: the caller cancelled the call mid-flight.
                outcome = (
                    "ok" if result is not None else type(error).__name__ if error else "cancelled"
                )
                if result is None:
                    span.failed(outcome)
                used_usd = self._used_usd(result, outcome, worst_usd, route_cfg)
                await self._settle(reservations, error, used_usd)
                await self._record(
                    scope, role, route_name, stage, started, result, outcome, error, used_usd
                )

    async def _reserve(self, limits: Sequence[SpendLimit], usd: float) -> list[Reservation]:
        if self.ledger is None:
            return []
        taken: list[Reservation] = []
        try:
            for limit in limits:
                if limit.max_calls is None and limit.max_usd is None:
                    continue
                taken.append(await self.ledger.reserve(limit, calls=1, usd=usd))
        except BaseException:
            for reservation in taken:
                await self.ledger.release(reservation)
            raise
        return taken

    @staticmethod
    def _used_usd(
        result: ChatResult | None, outcome: str, worst_usd: float, route: RouteConfig
    ) -> float:
        if result is not None:
            return cost_usd(
                result.usage.prompt_tokens,
                result.usage.completion_tokens,
                price_in=route.price_in or 0.0,
                price_out=route.price_out or 0.0,
            )
        # A timed-out or cancelled call may still be billed in full; an error answer is not.
        return worst_usd if outcome in {RouteTimeout.__name__, "cancelled"} else 0.0

    async def _settle(
        self, reservations: list[Reservation], error: RouteError | None, used_usd: float
    ) -> None:
        if self.ledger is None:
            return
        for reservation in reservations:
            if isinstance(error, RouteConnectionError):
                # The endpoint was never reached, so nothing was spent.
                await self.ledger.release(reservation)
            else:
                await self.ledger.commit(reservation, calls=1, usd=used_usd)

    async def _record(
        self,
        scope: CallScope,
        role: Role,
        route: str,
        stage: str,
        started: float,
        result: ChatResult | None,
        outcome: str,
        error: RouteError | None,
        used_usd: float,
    ) -> None:
        if self.trace is None or scope.trace_id is None:
            return
        data: dict[str, Any] = {
            "role": role.value,
            "route": route,
            "latency_ms": round((time.monotonic() - started) * 1000, 3),
            "cost_usd": used_usd,
            "outcome": outcome,
        }
        if result is not None:
            data |= {
                "model": result.model,
                "offline": result.offline,
                "finish_reason": result.finish_reason,
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
            }
        if error is not None:
            data["error"] = str(error)
        await self.trace.append(scope.trace_id, TraceEvent(EventKind.MODEL_CALL, stage, data))


def _worst_case_usd(
    request: ChatRequest, route_max_tokens: int, price_in: float | None, price_out: float | None
) -> float:
    if price_in is None and price_out is None:
        return 0.0
    # A token never covers less than one character in any tokenizer we meet, so the
    # character count bounds the prompt's tokens from above.
    prompt_chars = sum(len(m.text) + len(m.reasoning_content or "") for m in request.messages)
    completion = request.max_tokens or route_max_tokens
    return cost_usd(prompt_chars, completion, price_in=price_in or 0.0, price_out=price_out or 0.0)
