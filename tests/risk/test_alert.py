"""Guardian alerts: every precondition blocks and is recorded; delivery is write-ahead."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import logging
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foureyes.config import AlertConfig, PrivacyConfig, StoreConfig, load_config
from foureyes.core.errors import ConfigError, RouteHTTPError, RouteTimeout
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.core.tenancy import LOCAL_TENANT, scoped_conversation
from foureyes.llm.calls import ModelCaller
from foureyes.risk.alert import (
    ALERT_TEMPLATES,
    AlertBlock,
    AlertFacts,
    decide_alert,
    episode_of,
    is_template,
)
from foureyes.risk.guardian import AlertStatus, GuardianAlerts
from foureyes.risk.l0 import L0Gate
from foureyes.risk.notifiers import (
    AlertMessage,
    Delivery,
    FileNotifier,
    WebhookNotifier,
    build_notifier,
)
from foureyes.risk.result import RunPurpose, TriageResult
from foureyes.risk.triage import Triage, TriageRequest
from foureyes.store import Store
from foureyes.store.alerts import SqlAlertRecords
from tests.helpers.answers import answer
from tests.helpers.clock import ManualClock
from tests.risk._support import (
    ScriptedProvider,
    scripted_config,
    scripted_provider,
    scripted_routes,
)
from tests.risk.conftest import MakeTriage

CRISIS = "I wrote my suicide note and I will jump tonight"
L1, L2 = Role.RISK_L1, Role.RISK_L2


# --- the pure preconditions ---------------------------------------------------------------

NOW = dt.datetime(2026, 3, 14, 12, tzinfo=dt.UTC)
ALL_HELD = AlertFacts(
    confirmed=True,
    opted_in=True,
    contact_verified=True,
    enabled=True,
    now=NOW,
    last_alert_to_contact=None,
    cooldown=dt.timedelta(hours=24),
    attempts_today=0,
    daily_cap=5,
    episode_attempted=False,
    purpose=RunPurpose.LIVE,
    message=ALERT_TEMPLATES[Locale.EN],
)


@pytest.mark.parametrize(
    ("change", "block"),
    [
        ({"confirmed": False}, AlertBlock.NOT_CONFIRMED),
        ({"opted_in": False}, AlertBlock.NOT_OPTED_IN),
        ({"contact_verified": False}, AlertBlock.NO_VERIFIED_CONTACT),
        ({"enabled": False}, AlertBlock.DISABLED),
        ({"last_alert_to_contact": NOW - dt.timedelta(hours=23)}, AlertBlock.COOLDOWN),
        ({"attempts_today": 5}, AlertBlock.DAILY_CAP),
        ({"episode_attempted": True}, AlertBlock.DUPLICATE_EPISODE),
        ({"purpose": RunPurpose.TEST}, AlertBlock.TEST_RUN),
        ({"purpose": RunPurpose.CALIBRATION}, AlertBlock.TEST_RUN),
        (
            {"message": ALERT_TEMPLATES[Locale.EN] + " They wrote: I will jump"},
            AlertBlock.MESSAGE_NOT_TEMPLATE,
        ),
    ],
)
def test_each_precondition_alone_blocks(change: dict[str, Any], block: AlertBlock) -> None:
    assert decide_alert(ALL_HELD) == ()
    assert decide_alert(_with(change)) == (block,)


def _with(change: dict[str, Any]) -> AlertFacts:
    return dataclasses.replace(ALL_HELD, **change)


def test_the_cooldown_ends_exactly_after_its_length() -> None:
    assert decide_alert(_with({"last_alert_to_contact": NOW - dt.timedelta(hours=24)})) == ()


@settings(max_examples=300)
@given(
    confirmed=st.booleans(),
    opted_in=st.booleans(),
    contact=st.booleans(),
    enabled=st.booleans(),
    hours_since=st.none() | st.floats(0, 100),
    attempts=st.integers(0, 10),
    cap=st.integers(0, 10),
    duplicate=st.booleans(),
    purpose=st.sampled_from(list(RunPurpose)),
    templated=st.booleans(),
)
def test_an_alert_may_go_only_when_every_precondition_holds(
    confirmed: bool,
    opted_in: bool,
    contact: bool,
    enabled: bool,
    hours_since: float | None,
    attempts: int,
    cap: int,
    duplicate: bool,
    purpose: RunPurpose,
    templated: bool,
) -> None:
    """Invariant 5 over the pure decision."""
    last = None if hours_since is None else NOW - dt.timedelta(hours=hours_since)
    facts = _with(
        {
            "confirmed": confirmed,
            "opted_in": opted_in,
            "contact_verified": contact,
            "enabled": enabled,
            "last_alert_to_contact": last,
            "attempts_today": attempts,
            "daily_cap": cap,
            "episode_attempted": duplicate,
            "purpose": purpose,
            "message": ALERT_TEMPLATES[Locale.ZH_HANS] if templated else "你好",
        }
    )
    every = (
        confirmed
        and opted_in
        and contact
        and enabled
        and (hours_since is None or hours_since >= 24)
        and attempts < cap
        and not duplicate
        and purpose is RunPurpose.LIVE
        and templated
    )
    assert (decide_alert(facts) == ()) is every


def test_templates_exist_in_every_locale_and_carry_no_placeholder() -> None:
    assert set(ALERT_TEMPLATES) == set(Locale)
    for text in ALERT_TEMPLATES.values():
        assert is_template(text) and "{" not in text and "%" not in text
    assert not is_template(ALERT_TEMPLATES[Locale.EN].upper())
    assert episode_of(NOW) == "2026-03-14"


# --- the service over a real store --------------------------------------------------------


@pytest.fixture
def outbox(tmp_path: Path) -> Path:
    return tmp_path / "alerts.jsonl"


@pytest.fixture
def records(store: Store) -> SqlAlertRecords:
    return store.alerts


class Alerts:
    """A guardian-alert service plus what the tests need around it."""

    def __init__(
        self,
        records: SqlAlertRecords,
        make_triage: MakeTriage,
        provider: ScriptedProvider,
        clock: ManualClock,
        outbox: Path,
    ) -> None:
        self.records = records
        self.make_triage = make_triage
        self.provider = provider
        self.clock = clock
        self.outbox = outbox
        self.sleeps: list[float] = []

    def service(self, notifier: Any = None, **config: Any) -> GuardianAlerts:
        settings = {"enabled": True, "target": str(self.outbox), "retry_backoff_s": 0.5}

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        return GuardianAlerts(
            AlertConfig(**(settings | config)),
            self.records,
            notifier or FileNotifier(self.outbox),
            clock=self.clock,
            sleep=sleep,
        )

    async def ready(self, conversation: str = "c1", locale: Locale = Locale.ZH_HANT) -> str:
        alerts = self.service()
        await alerts.opt_in(conversation)
        contact = await alerts.add_contact(conversation, "+852 5555 0100", locale)
        await alerts.verify_contact(contact.id)
        return contact.id

    async def triage(
        self,
        conversation: str = "c1",
        *,
        l2: str | None = None,
        purpose: RunPurpose = RunPurpose.LIVE,
        tenant: str = LOCAL_TENANT,
    ) -> TriageResult:
        self.provider.enqueue(L1, answer("critical", 0.97))
        self.provider.enqueue(L2, l2 or answer("critical", 0.93))
        return await self.make_triage().assess(
            TriageRequest(text=CRISIS, conversation_id=conversation, purpose=purpose, tenant=tenant)
        )

    def sent(self) -> list[dict[str, Any]]:
        if not self.outbox.exists():
            return []
        return [json.loads(line) for line in self.outbox.read_text("utf-8").splitlines()]

    async def last_decision(self, conversation: str = "c1") -> dict[str, Any]:
        return (await self.records.decisions(scoped_conversation(LOCAL_TENANT, conversation)))[-1]


@pytest.fixture
def alerts(
    records: SqlAlertRecords,
    make_triage: MakeTriage,
    provider: ScriptedProvider,
    clock: ManualClock,
    outbox: Path,
) -> Alerts:
    return Alerts(records, make_triage, provider, clock, outbox)


async def test_a_confirmed_live_triage_alerts_the_verified_contact_with_a_template(
    alerts: Alerts,
) -> None:
    contact_id = await alerts.ready(locale=Locale.ZH_HANT)
    result = await alerts.triage()
    outcome = await alerts.service().consider(result)
    assert outcome.status is AlertStatus.SENT and outcome.tries == 1
    [line] = alerts.sent()
    assert line["text"] == ALERT_TEMPLATES[Locale.ZH_HANT] and line["locale"] == "zh-Hant"
    assert line["alert_id"] == outcome.attempt_id and line["to"] == "+852 5555 0100"
    assert "suicide" not in json.dumps(line) and "jump" not in json.dumps(line)
    [attempt] = await alerts.records.attempts()
    assert attempt.state == "sent" and attempt.tries == 1 and attempt.contact_id == contact_id
    decision = await alerts.last_decision()
    assert decision["outcome"] == "attempted" and decision["assessment_id"] == result.assessment_id


async def blocked(
    alerts: Alerts, outcome: Any, reason: AlertBlock, conv: str = "c1", sent: int = 0
) -> None:
    assert outcome.status is AlertStatus.BLOCKED and outcome.reason is reason
    assert len(alerts.sent()) == sent
    decision = await alerts.last_decision(conv)
    assert decision["outcome"] == "blocked" and decision["reason"] == reason.value


async def test_consent_and_contacts_belong_to_one_tenants_conversation(alerts: Alerts) -> None:
    service = alerts.service()
    await service.opt_in("c1", tenant="key:a")
    contact = await service.add_contact("c1", "+852 5555 0100", Locale.EN, tenant="key:a")
    await service.verify_contact(contact.id)
    for tenant in ("key:b", LOCAL_TENANT):  # the same id under another tenant
        outcome = await service.consider(await alerts.triage(tenant=tenant))
        assert outcome.reason is AlertBlock.NOT_OPTED_IN and alerts.sent() == []
    outcome = await service.consider(await alerts.triage(tenant="key:a"))
    assert outcome.status is AlertStatus.SENT and len(alerts.sent()) == 1
    [decision] = await alerts.records.decisions(scoped_conversation("key:a", "c1"))
    assert decision["outcome"] == "attempted"


async def test_1_an_unconfirmed_triage_does_not_alert(alerts: Alerts) -> None:
    await alerts.ready()
    result = await alerts.triage(l2=answer("high", 0.99))
    await blocked(alerts, await alerts.service().consider(result), AlertBlock.NOT_CONFIRMED)


async def test_1_a_failed_l2_does_not_alert(alerts: Alerts) -> None:
    await alerts.ready()
    alerts.provider.enqueue(L1, answer("critical", 1.0))
    alerts.provider.enqueue(L2, RouteTimeout("scripted", 1))
    result = await alerts.make_triage().assess(TriageRequest(text=CRISIS, conversation_id="c1"))
    await blocked(alerts, await alerts.service().consider(result), AlertBlock.NOT_CONFIRMED)


async def test_2_without_or_after_revoking_the_opt_in_nothing_is_sent(alerts: Alerts) -> None:
    service = alerts.service()
    contact = await service.add_contact("c1", "guardian@example.org", Locale.EN)
    await service.verify_contact(contact.id)
    result = await alerts.triage()
    await blocked(alerts, await service.consider(result), AlertBlock.NOT_OPTED_IN)
    opt_in = await service.opt_in("c1")
    assert opt_in.opted_in_at == alerts.clock() and opt_in.revoked_at is None
    alerts.clock.advance(minutes=5)
    assert await service.revoke_opt_in("c1") == 1
    assert await alerts.records.active_opt_in(scoped_conversation(LOCAL_TENANT, "c1")) is None
    await blocked(alerts, await service.consider(result), AlertBlock.NOT_OPTED_IN)


async def test_3_an_unverified_or_revoked_contact_is_never_alerted(alerts: Alerts) -> None:
    service = alerts.service()
    await service.opt_in("c1")
    contact = await service.add_contact("c1", "+86 138 0000 0000", Locale.ZH_HANS)
    result = await alerts.triage()
    await blocked(alerts, await service.consider(result), AlertBlock.NO_VERIFIED_CONTACT)
    await service.verify_contact(contact.id)
    await service.revoke_contact(contact.id)
    await blocked(alerts, await service.consider(result), AlertBlock.NO_VERIFIED_CONTACT)


async def test_4_a_deployment_without_alerts_enabled_sends_nothing(alerts: Alerts) -> None:
    await alerts.ready()
    result = await alerts.triage()
    outcome = await alerts.service(enabled=False).consider(result)
    await blocked(alerts, outcome, AlertBlock.DISABLED)


async def test_5_one_alert_per_contact_within_the_cooldown(alerts: Alerts) -> None:
    await alerts.ready()
    service = alerts.service()
    assert (await service.consider(await alerts.triage(), episode="e1")).sent
    alerts.clock.advance(hours=23, minutes=59)
    outcome = await service.consider(await alerts.triage(), episode="e2")
    assert outcome.status is AlertStatus.BLOCKED and outcome.reason is AlertBlock.COOLDOWN
    assert len(alerts.sent()) == 1
    assert (await alerts.last_decision())["reason"] == "cooldown"
    alerts.clock.advance(minutes=1)
    assert (await service.consider(await alerts.triage(), episode="e3")).sent


async def test_5_a_failed_delivery_does_not_start_the_cooldown(
    alerts: Alerts, tmp_path: Path
) -> None:
    await alerts.ready()
    broken = alerts.service(notifier=FileNotifier(tmp_path))  # a directory: cannot append
    failed = await broken.consider(await alerts.triage(), episode="e1")
    assert failed.status is AlertStatus.FAILED and "IsADirectoryError" in (failed.error or "")
    assert (await alerts.service().consider(await alerts.triage(), episode="e2")).sent


async def test_6_the_daily_cap_holds_across_conversations(alerts: Alerts) -> None:
    await alerts.ready("c1")
    await alerts.ready("c2")
    service = alerts.service(daily_cap=1)
    assert (await service.consider(await alerts.triage("c1"))).sent
    outcome = await service.consider(await alerts.triage("c2"))
    await blocked(alerts, outcome, AlertBlock.DAILY_CAP, conv="c2", sent=1)
    alerts.clock.advance(days=1)
    assert (await service.consider(await alerts.triage("c2"))).sent


async def test_6_concurrent_alerts_cannot_exceed_the_daily_cap(alerts: Alerts) -> None:
    conversations = [f"c{n}" for n in range(4)]
    for conversation in conversations:
        await alerts.ready(conversation)
    results = [await alerts.triage(conversation) for conversation in conversations]
    service = alerts.service(daily_cap=1)

    # Each evaluation reads the cap as free before any attempt is recorded.
    outcomes = await asyncio.gather(*(service.consider(result) for result in results))

    assert sum(o.sent for o in outcomes) == 1 and len(alerts.sent()) == 1
    assert {o.reason for o in outcomes if not o.sent} == {AlertBlock.DAILY_CAP}


async def test_7_one_attempt_per_episode(alerts: Alerts) -> None:
    await alerts.ready()
    service = alerts.service(cooldown_h=0.01)
    assert (await service.consider(await alerts.triage(), episode="e1")).sent
    alerts.clock.advance(hours=1)
    outcome = await service.consider(await alerts.triage(), episode="e1")
    await blocked(alerts, outcome, AlertBlock.DUPLICATE_EPISODE, sent=1)


async def test_7_concurrent_alerts_for_one_episode_send_once(alerts: Alerts) -> None:
    await alerts.ready()
    result = await alerts.triage()
    service = alerts.service()
    outcomes = await asyncio.gather(*(service.consider(result, episode="e1") for _ in range(4)))
    assert sum(o.sent for o in outcomes) == 1 and len(alerts.sent()) == 1
    assert {o.reason for o in outcomes if not o.sent} <= {
        AlertBlock.DUPLICATE_EPISODE,
        AlertBlock.COOLDOWN,
    }


@pytest.mark.parametrize("purpose", [RunPurpose.TEST, RunPurpose.CALIBRATION])
async def test_8_test_runs_are_recorded_apart_and_never_sent(
    alerts: Alerts, purpose: RunPurpose
) -> None:
    await alerts.ready()
    result = await alerts.triage(purpose=purpose)
    assert result.confirmed
    await blocked(alerts, await alerts.service().consider(result), AlertBlock.TEST_RUN)
    assert (await alerts.last_decision())["purpose"] == purpose.value
    assert await alerts.records.attempts() == []
    # A test alert neither uses the cooldown nor the cap of live ones.
    assert (await alerts.service(daily_cap=1).consider(await alerts.triage())).sent


async def test_9_the_message_is_a_template_whatever_the_conversation_said(
    alerts: Alerts,
) -> None:
    for n, locale in enumerate(Locale):
        await alerts.ready(f"c{n}", locale)
        assert (await alerts.service().consider(await alerts.triage(f"c{n}"))).sent
    texts = [line["text"] for line in alerts.sent()]
    assert texts == [ALERT_TEMPLATES[locale] for locale in Locale]


async def test_10_an_attempt_that_cannot_be_recorded_is_not_made(
    alerts: Alerts, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    await alerts.ready()
    result = await alerts.triage()
    with sqlite3.connect(store_url.removeprefix("sqlite+aiosqlite:///")) as conn:
        # Reads still work; the write-ahead insert fails, as on a full disk.
        conn.execute(
            "CREATE TRIGGER full BEFORE INSERT ON alert_attempts "
            "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    conn.close()
    with caplog.at_level(logging.WARNING, logger="foureyes.risk.guardian"):
        outcome = await alerts.service().consider(result)
    await blocked(alerts, outcome, AlertBlock.RECORD_FAILED)
    assert "nothing sent" in caplog.text


async def test_unreadable_alert_records_block_with_store_failed(
    alerts: Alerts, store_url: str
) -> None:
    await alerts.ready()
    result = await alerts.triage()
    with sqlite3.connect(store_url.removeprefix("sqlite+aiosqlite:///")) as conn:
        conn.execute("DROP TABLE alert_opt_ins")
    conn.close()
    outcome = await alerts.service().consider(result)
    await blocked(alerts, outcome, AlertBlock.STORE_FAILED)


async def test_10_the_attempt_is_pending_before_the_notifier_runs(alerts: Alerts) -> None:
    seen: list[str] = []

    class Inspecting:
        kind = "inspect"

        async def send(self, message: AlertMessage) -> Delivery:
            [attempt] = await alerts.records.attempts()
            seen.append(attempt.state)
            raise RuntimeError("a notifier bug")

    await alerts.ready()
    result = await alerts.triage()
    with pytest.raises(RuntimeError):
        await alerts.service(notifier=Inspecting()).consider(result)
    assert seen == ["pending"]
    # The process "crashed" mid-send: the attempt is still on record, never silently lost.
    [pending] = await alerts.records.attempts(state="pending")
    assert pending.tries == 0


# --- the webhook notifier against a real loopback server ----------------------------------


class Hook:
    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        status = self.statuses.pop(0) if self.statuses else 200
        return web.Response(status=status, text="ok")


@pytest.fixture
async def hook() -> AsyncIterator[Hook]:
    receiver = Hook([])
    app = web.Application()
    app.router.add_post("/alerts", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    receiver.url = f"http://{host}:{port}/alerts"
    yield receiver
    await runner.cleanup()


async def test_webhook_failures_are_retried_a_bounded_number_of_times(
    alerts: Alerts, hook: Hook
) -> None:
    hook.statuses = [500, 503]
    await alerts.ready(locale=Locale.EN)
    service = alerts.service(notifier=WebhookNotifier(hook.url, timeout_s=5))
    outcome = await service.consider(await alerts.triage())
    assert outcome.sent and outcome.tries == 3 and alerts.sleeps == [0.5, 0.5]
    assert len(hook.bodies) == 3 and len({b["alert_id"] for b in hook.bodies}) == 1
    body = hook.bodies[0]
    assert body == {
        "type": "foureyes.guardian_alert",
        "alert_id": outcome.attempt_id,
        "to": "+852 5555 0100",
        "locale": "en",
        "text": ALERT_TEMPLATES[Locale.EN],
    }
    [attempt] = await alerts.records.attempts()
    assert attempt.state == "sent" and attempt.tries == 3


async def test_a_webhook_that_keeps_failing_ends_failed_and_recorded(
    alerts: Alerts, hook: Hook
) -> None:
    hook.statuses = [503] * 10
    await alerts.ready()
    service = alerts.service(notifier=WebhookNotifier(hook.url, timeout_s=5), max_send_attempts=2)
    outcome = await service.consider(await alerts.triage())
    assert outcome.status is AlertStatus.FAILED and outcome.tries == 2
    assert outcome.error == "HTTP 503" and len(hook.bodies) == 2
    [attempt] = await alerts.records.attempts(state="failed")
    assert attempt.tries == 2 and attempt.last_error == "HTTP 503"


async def test_an_unreachable_webhook_is_a_failed_delivery() -> None:
    notifier = WebhookNotifier("http://127.0.0.1:9/alerts", timeout_s=2)
    delivery = await notifier.send(AlertMessage("a1", "x", Locale.EN, ALERT_TEMPLATES[Locale.EN]))
    assert not delivery.delivered and "Error" in delivery.detail


def test_the_notifier_comes_from_config(tmp_path: Path) -> None:
    hook = build_notifier(AlertConfig(notifier="webhook", target="https://hooks.example/a"))
    assert isinstance(hook, WebhookNotifier)
    assert isinstance(build_notifier(AlertConfig(target=str(tmp_path / "a.jsonl"))), FileNotifier)
    with pytest.raises(ConfigError):
        build_notifier(AlertConfig())
    with pytest.raises(ConfigError, match="risk.alert.target is required"):
        load_config(environ={"FOUREYES_RISK__ALERT__ENABLED": "true"})
    with pytest.raises(ConfigError, match="http"):
        load_config(
            environ={
                "FOUREYES_RISK__ALERT__NOTIFIER": "webhook",
                "FOUREYES_RISK__ALERT__TARGET": "/tmp/x",
            }
        )


# --- invariant 5 end to end ---------------------------------------------------------------

OUTCOMES = st.one_of(
    st.tuples(
        st.sampled_from(["low", "medium", "high", "critical"]),
        st.sampled_from([0.3, 0.84, 0.85, 0.99]),
        st.sampled_from([(), ("joke",), ("third_party",)]),
    ),
    st.sampled_from(["timeout", "http_500", "malformed"]),
)


def _replies(outcome: Any) -> list[Any]:
    if outcome == "timeout":
        return [RouteTimeout("scripted", 1)]
    if outcome == "http_500":
        return [RouteHTTPError("scripted", 500)]
    if outcome == "malformed":
        return ['{"risk_level": "super_critical"}', "prose only"]
    level, confidence, flags = outcome
    return [answer(level, confidence, flags=flags)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(OUTCOMES, OUTCOMES), min_size=1, max_size=4))
def test_degradation_never_moves_towards_alerting(sequence: list[tuple[Any, Any]]) -> None:
    """Invariant 5 over any sequence of L1/L2 outcomes.

    An alert is attempted exactly when both said critical with confidence and no flag,
    and every other precondition held.
    """
    asyncio.run(_run_sequence(sequence))


async def _run_sequence(sequence: list[tuple[Any, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(
            StoreConfig(url=f"sqlite+aiosqlite:///{tmp}/s.db"), PrivacyConfig(), {}
        )
        try:
            provider = scripted_provider()
            config = scripted_config()
            caller = ModelCaller(
                scripted_routes(config, provider), ledger=store.ledger, trace=store.traces
            )
            clock = ManualClock()
            triage = Triage(config, caller, store.assessments, _GATE, clock=clock)
            outbox = Path(tmp) / "out.jsonl"
            service = GuardianAlerts(
                AlertConfig(enabled=True, target=str(outbox), cooldown_h=0.001, daily_cap=100),
                store.alerts,
                FileNotifier(outbox),
                clock=clock,
            )
            sent = 0
            for n, (l1, l2) in enumerate(sequence):
                conversation = f"c{n}"
                await service.opt_in(conversation)
                contact = await service.add_contact(conversation, "x", Locale.EN)
                await service.verify_contact(contact.id)
                provider.enqueue(L1, *_replies(l1))
                provider.enqueue(L2, *_replies(l2))
                result = await triage.assess(
                    TriageRequest(text=CRISIS, conversation_id=conversation)
                )
                outcome = await service.consider(result)
                provider.clear()
                strong = ("critical", 0.85, ()), ("critical", 0.99, ())
                should = (
                    isinstance(l1, tuple)
                    and isinstance(l2, tuple)
                    and l1 in strong
                    and l2 in strong
                )
                assert result.confirmed is should
                assert outcome.sent is should
                sent += outcome.sent
                clock.advance(minutes=1)
            lines = outbox.read_text("utf-8").splitlines() if outbox.exists() else []
            assert len(lines) == sent
        finally:
            await store.close()


_GATE = L0Gate.default()
