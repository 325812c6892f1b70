"""The fault matrix: every model call site x every simulator fault and finish reason x transport.

Each case loads one scenario into the session's ``foureyes simulate`` (``PUT /_sim/scenario``)
in which every role answers normally except the one under test, drives that role's real
entry point over real HTTP, and checks three things:

- nothing acted on the failed answer: no reply released, no guardian alert, no observation
  committed, no packet published (and, for the ``delay`` fault within the route timeout,
  that the same harness does act: the matrix's positive control);
- the site's own reason code for that failure, and the failure's own detail where the site
  records it (the error class or :class:`~foureyes.llm.structured.ParseFailure`);
- the trace's ``model_call`` event of that role, which names what the route saw.

The cases are generated from :class:`~foureyes.core.roles.Role`, the simulator's
:class:`~foureyes.llm._scenario.Fault` and the route's transports, so a new role, fault or
transport is a failing case until this table says what it must become.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import time
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from foureyes.config import (
    AlertConfig,
    Config,
    GateConfig,
    InputConfig,
    PrivacyConfig,
    RolesConfig,
    RouteConfig,
    StoreConfig,
)
from foureyes.core.deadline import Deadline
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind
from foureyes.evals.agent import AgentLoop, StopReason
from foureyes.evals.workspace import Workspace
from foureyes.evidence import (
    DurableOwner,
    EvidenceSelector,
    FactsRequest,
    JsonFileCatalogSource,
    SelectorFailed,
    select_facts,
)
from foureyes.gate import Outcome
from foureyes.llm._scenario import Fault, Rule
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.llm.structured import ParseFailure
from foureyes.pipeline import SupportMessage, SupportPipeline
from foureyes.review import ReviewRunner
from foureyes.risk.guardian import GuardianAlerts
from foureyes.risk.l0 import L0Gate
from foureyes.risk.notifiers import FileNotifier
from foureyes.store import Store
from tests.evidence._support import CATALOG_FILE, example_catalog, example_kinds
from tests.helpers.answers import answer, by_message
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import REQUEST as REVIEW_REQUEST
from tests.review._runner_support import packet

ROUTE_TIMEOUT_S = 0.4
"""The timeout of the role under test in a ``hang`` case: what that case costs."""
GENEROUS_TIMEOUT_S = 60.0
"""Every other route's timeout. A loaded machine can stall this process for a second or
more (a full garbage collection of a large test worker, the other worker's browser); a
short timeout on a call that should succeed turns such a stall into a wrong reason code."""
DELAY_S = 0.05
"""The ``delay`` fault's wait: well inside the route timeout, so the answer counts."""

CALM = "I had a rough day at work and I can't sleep."
"""A message L0 does not escalate: only the Counselor and the Supervisor are called."""
CRISIS = "I want to die, I have the pills ready."
"""A message L0 escalates: L1, then L2, are called."""
DRAFT = "Thank you for telling me. That sounds heavy; what feels hardest right now?"
APPROVE = json.dumps(
    {
        "candidate_sha256": "{{candidate_sha256}}",
        "decision": "approve",
        "violations": [],
        "missing": [],
    }
)
SELECTION = json.dumps({"selections": [{"kind": "exercise_pattern", "evidence_ref": "ex-1"}]})

NORMAL_ANSWERS: Mapping[Role, str] = {
    Role.COUNSELOR: DRAFT,
    Role.SUPERVISOR: APPROVE,
    Role.RISK_L1: answer("critical", 0.97),
    Role.RISK_L2: answer("critical", 0.93),
    Role.REVIEWER: packet("the agent never ran the tests"),
    Role.SELECTOR: SELECTION,
    Role.PRIMARY: "Done: nothing was left to change.",
    Role.INPUT_CHECKER: json.dumps(
        {"items": [{"sha256": "{{candidate_sha256}}", "categories": []}]}
    ),
}
"""What each role answers when it is not the one under test: a complete, valid answer
that, left alone, releases, alerts, publishes or commits."""

TRANSPORTS: tuple[str, ...] = typing.get_args(RouteConfig.model_fields["transport"].annotation)
"""Every way an ``openai`` route talks HTTP: the SDK over aiohttp and httpx, and lean."""


class Failure(enum.Enum):
    """What a site sees of an injection (the columns of its reason table)."""

    NONE = "none"
    TIMEOUT = "timeout"
    HTTP_ERROR = "http_error"
    RATE_LIMITED = "rate_limited"
    BAD_RESPONSE = "bad_response"
    INCOMPLETE = "incomplete"
    """The answer did not finish with a normal stop (its text is never read)."""
    DIGEST_MISMATCH = "digest_mismatch"


@dataclass(frozen=True)
class Injection:
    """One thing the simulator does to the role under test."""

    name: str
    rule: Mapping[str, Any]
    """Keys laid over the role's normal rule."""
    failure: Failure
    call_outcome: str
    """The ``outcome`` the role's last ``model_call`` event records."""
    finish_reason: str | None = None
    """For incomplete answers: the finish reason the endpoint reported."""
    parse_failure: ParseFailure | None = None
    """For incomplete answers: the failure the one finish rule names."""


FAULTS: Mapping[Fault, Injection] = {
    Fault.DELAY: Injection(
        "delay", {"fault": "delay", "delay_s": DELAY_S}, Failure.NONE, "ok", "stop"
    ),
    Fault.HANG: Injection("hang", {"fault": "hang"}, Failure.TIMEOUT, "RouteTimeout"),
    Fault.HTTP_401: Injection(
        "http_401", {"fault": "http_401"}, Failure.HTTP_ERROR, "RouteHTTPError"
    ),
    Fault.HTTP_429: Injection(
        "http_429", {"fault": "http_429"}, Failure.RATE_LIMITED, "RouteRateLimited"
    ),
    Fault.HTTP_500: Injection(
        "http_500", {"fault": "http_500"}, Failure.HTTP_ERROR, "RouteHTTPError"
    ),
    Fault.MALFORMED_JSON: Injection(
        "malformed_json", {"fault": "malformed_json"}, Failure.BAD_RESPONSE, "RouteBadResponse"
    ),
    Fault.TRUNCATED: Injection(
        "truncated",
        {"fault": "truncated"},
        Failure.INCOMPLETE,
        "ok",
        "length",
        ParseFailure.TRUNCATED,
    ),
    Fault.WRONG_DIGEST: Injection(
        "wrong_digest", {"fault": "wrong_digest"}, Failure.DIGEST_MISMATCH, "ok", "stop"
    ),
}
"""Each simulator fault, as the role under test meets it."""

FINISH_FAILURES: Mapping[str, ParseFailure] = {
    "length": ParseFailure.TRUNCATED,
    "content_filter": ParseFailure.CONTENT_FILTERED,
    # No call site asks for tool calls, so this finish is never a normal one.
    "tool_calls": ParseFailure.UNEXPECTED_TOOL_CALLS,
}
"""Each finish reason the simulator can send other than ``stop``, and the failure it is."""

SIMULATED_FINISHES: tuple[str, ...] = tuple(
    value
    for arg in typing.get_args(Rule.model_fields["finish_reason"].annotation)
    for value in typing.get_args(arg)
    if value != "stop"
)


def _finish(finish: str) -> Injection | str:
    failure = FINISH_FAILURES.get(finish)
    if failure is None:
        return finish  # stays in the matrix, as a failing case
    return Injection(
        f"finish_{finish}", {"finish_reason": finish}, Failure.INCOMPLETE, "ok", finish, failure
    )


NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class Seen:
    """What a site's entry point did with one case."""

    acted: bool
    """Released, alerted, committed or published."""
    reason: str
    """The site's reason code (its success word when it acted)."""
    detail: str
    """Where the site records how the call failed (error text, parse failure)."""
    trace_id: str | None


@dataclass(frozen=True)
class Site:
    """One model call site: its entry point, its success word and its reason table."""

    success: str
    reasons: Mapping[Failure, str]
    """The reason each failure becomes; ``NOT_APPLICABLE`` (said why below) excludes it."""
    records_error_class: bool
    """Whether the site's own record names the route error's class (else only the trace)."""
    finish_failures: Mapping[str, ParseFailure] = dataclasses.field(default_factory=dict)
    """Finish reasons this site reads differently from :data:`FINISH_FAILURES`."""


_GATE_DRAFT = {
    Failure.TIMEOUT: "draft_failed",
    Failure.HTTP_ERROR: "draft_failed",
    Failure.RATE_LIMITED: "draft_failed",
    Failure.BAD_RESPONSE: "draft_failed",
    Failure.INCOMPLETE: "draft_failed",
    # A draft names no digest; the digest the Supervisor judges is taken from it by code.
    Failure.DIGEST_MISMATCH: NOT_APPLICABLE,
}

SITES: Mapping[Role, Site] = {
    Role.COUNSELOR: Site("approved", _GATE_DRAFT, records_error_class=True),
    Role.SUPERVISOR: Site(
        "approved",
        {
            Failure.TIMEOUT: "review_timeout",
            Failure.HTTP_ERROR: "review_failed",
            Failure.RATE_LIMITED: "review_failed",
            Failure.BAD_RESPONSE: "review_failed",
            Failure.INCOMPLETE: "review_malformed",
            Failure.DIGEST_MISMATCH: "verdict_mismatch",
        },
        records_error_class=True,
    ),
    Role.RISK_L1: Site(
        "confirmed",
        {
            Failure.TIMEOUT: "l1_timeout",
            Failure.HTTP_ERROR: "l1_failed",
            Failure.RATE_LIMITED: "l1_failed",
            Failure.BAD_RESPONSE: "l1_failed",
            Failure.INCOMPLETE: "l1_malformed",
            # An assessment names no digest (its evidence is model text, never a binding).
            Failure.DIGEST_MISMATCH: NOT_APPLICABLE,
        },
        records_error_class=False,
    ),
    Role.RISK_L2: Site(
        "confirmed",
        {
            Failure.TIMEOUT: "l2_timeout",
            Failure.HTTP_ERROR: "l2_failed",
            Failure.RATE_LIMITED: "l2_failed",
            Failure.BAD_RESPONSE: "l2_failed",
            Failure.INCOMPLETE: "l2_malformed",
            Failure.DIGEST_MISMATCH: NOT_APPLICABLE,
        },
        records_error_class=False,
    ),
    Role.REVIEWER: Site(
        "accepted",
        {
            Failure.TIMEOUT: "review_timeout",
            Failure.HTTP_ERROR: "review_failed",
            Failure.RATE_LIMITED: "review_failed",
            Failure.BAD_RESPONSE: "review_failed",
            Failure.INCOMPLETE: "review_incomplete",
            # A packet binds no digest; its own digest is computed by code.
            Failure.DIGEST_MISMATCH: NOT_APPLICABLE,
        },
        records_error_class=True,
    ),
    Role.SELECTOR: Site(
        "committed",
        {
            Failure.TIMEOUT: "selector_timeout",
            Failure.HTTP_ERROR: "selector_failed",
            Failure.RATE_LIMITED: "selector_failed",
            Failure.BAD_RESPONSE: "selector_failed",
            Failure.INCOMPLETE: "selector_malformed",
            # Selections name catalog refs, not digests; the snapshot's digest is code's.
            Failure.DIGEST_MISMATCH: NOT_APPLICABLE,
        },
        records_error_class=True,
    ),
    Role.PRIMARY: Site(
        "completed",
        {
            Failure.TIMEOUT: "route_timeout",
            Failure.HTTP_ERROR: "route_failed",
            Failure.RATE_LIMITED: "route_failed",
            Failure.BAD_RESPONSE: "route_failed",
            Failure.INCOMPLETE: "incomplete",
            # An agent's answer binds no digest: it is the Primary's own next step.
            Failure.DIGEST_MISMATCH: NOT_APPLICABLE,
        },
        records_error_class=False,
        # The Primary is asked for tool calls: a tool_calls finish without any is unfinished.
        finish_failures={"tool_calls": ParseFailure.UNFINISHED},
    ),
    # The model input check, told to block when it cannot judge ([input] on_failure), so
    # that a failed check acting would be a released reply.
    Role.INPUT_CHECKER: Site(
        "approved",
        {
            Failure.TIMEOUT: "input_unchecked",
            Failure.HTTP_ERROR: "input_unchecked",
            Failure.RATE_LIMITED: "input_unchecked",
            Failure.BAD_RESPONSE: "input_unchecked",
            Failure.INCOMPLETE: "input_unchecked",
            Failure.DIGEST_MISMATCH: "input_unchecked",
        },
        records_error_class=True,
    ),
}
"""Every model call site, by the role that calls it."""


def _injections() -> list[Injection | Fault | str]:
    """Every fault, then every finish reason but ``stop`` (unknown ones as failing cases)."""
    faults: list[Injection | Fault | str] = [FAULTS.get(fault, fault) for fault in Fault]
    return faults + [_finish(finish) for finish in SIMULATED_FINISHES]


def _cases() -> list[Any]:
    cases = []
    for transport in TRANSPORTS:
        for role in Role:
            site = SITES.get(role)
            for injection in _injections():
                if (
                    isinstance(injection, Injection)
                    and site is not None
                    and site.reasons.get(injection.failure) == NOT_APPLICABLE
                ):
                    continue
                name = injection.name if isinstance(injection, Injection) else str(injection)
                cases.append(
                    pytest.param(transport, role, injection, id=f"{transport}-{role}-{name}")
                )
    return cases


CASES = _cases()


@dataclass
class Stack:
    """One transport's entry points over routes built from one config."""

    pipeline: SupportPipeline
    reviewer: ReviewRunner
    selector: EvidenceSelector
    caller: ModelCaller
    routes: Routes


@dataclass
class World:
    """What the whole module shares: one store, the alert service, the stacks it built."""

    store: Store
    alerts: GuardianAlerts
    owner: DurableOwner
    simulator: RunningSimulator
    folder: Path
    stacks: dict[tuple[str, Role | None], Stack] = dataclasses.field(default_factory=dict)

    def stack(self, transport: str, short: Role | None) -> Stack:
        """The stack of ``transport`` in which only ``short`` (if any) has the short timeout.

        Built once per key: a case reuses its transport's pooled connections, as a
        deployment does.
        """
        key = (transport, short)
        if key not in self.stacks:
            config = _config(self.simulator, transport, short)
            routes = Routes.build(config, {})
            caller = ModelCaller(routes, ledger=self.store.ledger, trace=self.store.traces)
            self.stacks[key] = Stack(
                pipeline=SupportPipeline(
                    config, routes, self.store, alerts=self.alerts, l0=L0Gate.default()
                ),
                reviewer=ReviewRunner(caller, packet_max_chars=10_000),
                selector=EvidenceSelector(caller, example_kinds()),
                caller=caller,
                routes=routes,
            )
        return self.stacks[key]


def _config(simulator: RunningSimulator, transport: str, short: Role | None) -> Config:
    return Config(
        routes={
            role.value: simulator.route(
                role.value,
                timeout_s=ROUTE_TIMEOUT_S if role is short else GENEROUS_TIMEOUT_S,
                transport=transport,
            )
            for role in Role
        },
        roles=RolesConfig(**{role.value: role.value for role in Role}),
        gate=GateConfig(max_revisions=0),
        input=InputConfig(model_check=True, on_failure="block"),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    simulator_process: RunningSimulator, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    """One store and the alert service; stacks are built as the cases ask for them."""
    folder = tmp_path_factory.mktemp("fault-matrix")
    store = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{folder / 'matrix.db'}"), PrivacyConfig(), {}
    )
    outbox = folder / "outbox.jsonl"
    alerts = GuardianAlerts(
        AlertConfig(enabled=True, target=str(outbox), daily_cap=100_000),
        store.alerts,
        FileNotifier(outbox),
    )
    world = World(
        store=store,
        alerts=alerts,
        owner=DurableOwner(
            JsonFileCatalogSource(CATALOG_FILE), example_kinds(), store.observations
        ),
        simulator=simulator_process,
        folder=folder,
    )
    try:
        yield world
    finally:
        for stack in world.stacks.values():
            await stack.pipeline.aclose()
            await stack.routes.aclose()
        await store.close()


# --- the entry points ---------------------------------------------------------------------


async def _gate(world: World, stack: Stack, case: str) -> Seen:
    outcome = await stack.pipeline.handle(SupportMessage(text=CALM, conversation_id=case))
    assert not outcome.triage.l0.escalate  # only the gate's roles were called
    released = outcome.decision is Outcome.RELEASED
    if not released:
        assert DRAFT not in outcome.text
    errors = " ".join(a.error or "" for a in outcome.gate.attempts)
    return Seen(released, outcome.reason.value, errors, outcome.trace_id)


async def _risk(world: World, stack: Stack, case: str) -> Seen:
    # Everything an alert needs but a confirmation is in place, so "no alert" means something.
    await world.alerts.opt_in(case)
    contact = await world.alerts.add_contact(case, f"{case}@example.org", Locale.EN)
    await world.alerts.verify_contact(contact.id)
    outcome = await stack.pipeline.handle(SupportMessage(text=CRISIS, conversation_id=case))
    triage = outcome.triage
    if triage.confirmed:
        assert outcome.alert is not None and outcome.alert["status"] in {"sent", "pending"}
        return Seen(True, "confirmed", "", outcome.trace_id)
    assert outcome.alert is None and await world.store.alerts.decisions(case) == []
    # Degradation keeps the restriction on the reply (invariant 5): never back to normal.
    assert outcome.policy.policy is not GenerationPolicy.NORMAL
    assert len(triage.reasons) == 1
    detail = ""
    if outcome.trace_id is not None:
        record = await world.store.traces.get(outcome.trace_id)
        assert record is not None
        stages = [e.data for e in record.events if e.kind is EventKind.RISK]
        detail = " ".join(str(s.get("parse_failure", "")) for s in stages)
    return Seen(False, triage.reasons[0].value, detail, outcome.trace_id)


async def _reviewer(world: World, stack: Stack, case: str) -> Seen:
    outcome = await stack.reviewer.run(
        REVIEW_REQUEST, deadline=Deadline.after(GENEROUS_TIMEOUT_S), conversation_id=case
    )
    if not outcome.published:
        assert outcome.packet is None
    return Seen(outcome.published, outcome.reason.value, outcome.detail, outcome.trace_id)


async def _selector(world: World, stack: Stack, case: str) -> Seen:
    catalog = example_catalog()
    assert catalog.subject is not None
    # Each case its own tenant: the subject is the catalog's own (issue 37).
    outcome = await select_facts(
        catalog,
        FactsRequest(subject=catalog.subject, tenant=case, task="plan the week's training"),
        selector=stack.selector,
        owner=world.owner,
        traces=world.store.traces,
    )
    committed = await world.store.observations.for_subject(catalog.subject, tenant=case)
    assert bool(committed) == outcome.ok
    detail = ""
    if isinstance(outcome.selection, SelectorFailed):
        detail = f"{outcome.selection.parse_failure} {outcome.selection.detail}"
    return Seen(bool(committed), outcome.status.value, detail, outcome.trace_id)


async def _input(world: World, stack: Stack, case: str) -> Seen:
    outcome = await stack.pipeline.handle(SupportMessage(text=CALM, conversation_id=case))
    released = outcome.decision is Outcome.RELEASED
    if not released:
        assert DRAFT not in outcome.text
    record = await world.store.traces.get(outcome.trace_id)
    assert record is not None
    [event] = [e.data for e in record.events if e.kind is EventKind.INPUT]
    model = event["inputs"][0]["model"]
    return Seen(released, outcome.reason.value, model.get("detail", ""), outcome.trace_id)


async def _primary(world: World, stack: Stack, case: str) -> Seen:
    # One step: a complete answer ends the turn (it acted); any other stops the loop.
    workspace = world.folder / case
    workspace.mkdir()
    trace_id = await world.store.traces.start_run("agent_run", conversation_id=case)
    result = await AgentLoop(
        stack.caller, Workspace(workspace), max_steps=1, trace_id=trace_id
    ).run("Check the workspace and say when you are done.")
    failed = result.stop is StopReason.MODEL_FAILED
    reason = result.failure if failed and result.failure else result.stop.value
    return Seen(result.stop is StopReason.COMPLETED, reason, result.failure or "", trace_id)


ENTRY_POINTS: Mapping[Role, Callable[[World, Stack, str], Awaitable[Seen]]] = {
    Role.COUNSELOR: _gate,
    Role.SUPERVISOR: _gate,
    Role.RISK_L1: _risk,
    Role.RISK_L2: _risk,
    Role.REVIEWER: _reviewer,
    Role.SELECTOR: _selector,
    Role.PRIMARY: _primary,
    Role.INPUT_CHECKER: _input,
}


def _scenario(role: Role, injection: Injection) -> dict[str, Any]:
    models: dict[str, list[dict[str, Any]]] = {
        r.value: [{"content": NORMAL_ANSWERS[r]}] for r in Role
    }
    # L1 reads every message: the gate's sites send a calm one, which L1 finds low.
    models[Role.RISK_L1.value] = by_message(NORMAL_ANSWERS[Role.RISK_L1])
    models[role.value] = [{"content": NORMAL_ANSWERS[role], **injection.rule}]
    return {"models": models}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("transport", "role", "injection"), CASES)
async def test_no_call_site_acts_on_a_failed_call(
    world: World,
    simulator_process: RunningSimulator,
    transport: str,
    role: Role,
    injection: Injection | Fault | str,
) -> None:
    site = SITES.get(role)
    if site is None or role not in ENTRY_POINTS:
        pytest.fail(f"role {role} has no call site in the fault matrix: add its entry point")
    if not isinstance(injection, Injection):
        pytest.fail(f"{injection!r} has no case in the fault matrix: say what it becomes")
    if injection.failure is not Failure.NONE and injection.failure not in site.reasons:
        pytest.fail(f"{role} does not say what {injection.failure} becomes")
    case = f"{transport}-{role}-{injection.name}"
    simulator_process.load(_scenario(role, injection))

    short = role if injection.failure is Failure.TIMEOUT else None
    seen = await ENTRY_POINTS[role](world, world.stack(transport, short), case)

    if injection.failure is Failure.NONE:
        assert (seen.acted, seen.reason) == (True, site.success)
    else:
        assert not seen.acted, f"{role} acted on a call that failed with {injection.name}"
        assert seen.reason == site.reasons[injection.failure], seen
        parse_failure = site.finish_failures.get(
            injection.finish_reason or "", injection.parse_failure
        )
        if parse_failure is not None:
            assert parse_failure.value in seen.detail
        elif site.records_error_class and injection.call_outcome != "ok":
            assert injection.call_outcome in seen.detail
    assert seen.trace_id is not None
    record = await world.store.traces.get(seen.trace_id)
    assert record is not None
    calls = [
        e.data
        for e in record.events
        if e.kind is EventKind.MODEL_CALL and e.data["role"] == role.value
    ]
    assert calls, f"{role} was never called"
    assert calls[-1]["outcome"] == injection.call_outcome
    if injection.finish_reason is not None:
        assert calls[-1]["finish_reason"] == injection.finish_reason


def test_the_matrix_covers_every_site_fault_and_finish_on_every_transport() -> None:
    per_transport = len(CASES) // len(TRANSPORTS)
    excluded = sum(
        1
        for site in SITES.values()
        for injection in _injections()
        if isinstance(injection, Injection)
        and site.reasons.get(injection.failure) == NOT_APPLICABLE
    )
    assert set(SITES) == set(Role) == set(ENTRY_POINTS)
    assert set(FAULTS) == set(Fault)
    assert (
        set(FINISH_FAILURES)
        == set(SIMULATED_FINISHES)
        == {"length", "content_filter", "tool_calls"}
    )
    assert per_transport == len(Role) * (len(Fault) + len(SIMULATED_FINISHES)) - excluded
    assert {"aiohttp", "lean"} <= set(TRANSPORTS)


STALL_S = 2.5 * ROUTE_TIMEOUT_S
"""How long the stall test blocks this process's event loop: longer than the short timeout."""


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_stalled_event_loop_does_not_fail_a_call_that_is_not_under_test(
    world: World, simulator_process: RunningSimulator, transport: str
) -> None:
    # The matrix once gave every route the short timeout, and a fresh-clone run failed a
    # supervisor http_401 case as review_timeout: the worker stalled 1.3 s before the
    # request was written. Here the loop is blocked while the Counselor's call is in flight
    # (it answers after 0.5 s), in the stack a hang of the Supervisor uses.
    case = f"{transport}-stalled-loop"
    scenario = _scenario(Role.SUPERVISOR, FAULTS[Fault.DELAY])
    scenario["models"][Role.COUNSELOR.value][0].update({"fault": "delay", "delay_s": 0.5})
    simulator_process.load(scenario)
    loop = asyncio.get_running_loop()
    stall = loop.call_later(0.1, time.sleep, STALL_S)
    try:
        seen = await _gate(world, world.stack(transport, Role.SUPERVISOR), case)
    finally:
        stall.cancel()
    assert (seen.acted, seen.reason) == (True, SITES[Role.SUPERVISOR].success), seen
