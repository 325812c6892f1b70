"""Two API keys naming the same conversation id: real uvicorn, the ``openai`` SDK, the simulator.

A conversation id is the client's choice, so each key's conversations are its own
(``foureyes.core.tenancy``): what one key's messages left behind (open unknowns, the
trend L2 is shown, the daily L1 count, a guardian's consent) must neither reach nor be
touched by the other key's messages with the same id; and the key's own daily L1 cap
holds whatever ids it sends.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai

from foureyes.config import AlertConfig, Config, PrivacyConfig, RiskConfig, ServerConfig
from foureyes.core.locale import Locale
from foureyes.core.tenancy import key_tenant, scoped_conversation
from foureyes.risk.guardian import GuardianAlerts
from foureyes.risk.notifiers import FileNotifier
from foureyes.store import Store
from foureyes.store.api_keys import api_key_digest
from tests.e2e.test_gateway import SCENARIO, sim_config
from tests.helpers.server import RunningServer
from tests.helpers.simulator import RunningSimulator

Start = Callable[..., RunningServer]
KEY_A = "tenant-a-key-" + "a" * 20
KEY_B = "tenant-b-key-" + "b" * 20
ADMIN = "tenant-admin-" + "d" * 20
ENV = {"CLIENT_KEYS": f"{KEY_A},{KEY_B}", "ADMIN_KEYS": ADMIN}
CALM = "I had a rough day at work and I can't sleep."
CRISIS = "I want to die."
CONFIRMED = "crisis-confirmed: I want to die, I have the pills here."
MISSING = "whether the user is safe tonight"  # what the insufficient verdict lists
NO_TREND = "Trend: no earlier assessments"


def keyed_config(simulator: RunningSimulator, store_url: str, outbox: Path, **risk: Any) -> Config:
    """The simulator's roles, two client keys and an admin key, alerts to ``outbox``.

    Raw text is kept, so an open unknown's wording reaches later prompts and can be looked
    for there.
    """
    alert = AlertConfig(enabled=True, target=str(outbox), retry_backoff_s=0)
    return sim_config(simulator, store_url).model_copy(
        update={
            "server": ServerConfig(api_keys_env="CLIENT_KEYS", admin_keys_env="ADMIN_KEYS"),
            "risk": RiskConfig(alert=alert, **risk),
            "privacy": PrivacyConfig(store_raw_text=True),
        }
    )


def ask(server: RunningServer, key: str, text: str, conversation: str | None) -> Any:
    client = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0)
    options = {} if conversation is None else {"user": conversation}
    reply = client.chat.completions.create(
        model="foureyes-support", messages=[{"role": "user", "content": text}], **options
    )
    return reply.model_extra["foureyes"]


def assess(server: RunningServer, key: str, text: str, conversation: str | None) -> Any:
    body: dict[str, Any] = {"text": text}
    if conversation is not None:
        body["conversation_id"] = conversation
    response = httpx.post(
        f"{server.base_url}/assess",
        json=body,
        headers={"authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def tenant_of(server: RunningServer, key: str) -> str:
    """The tenant of ``key``, from its id in ``GET /v1/keys``."""
    response = httpx.get(
        f"{server.base_url}/keys", headers={"authorization": f"Bearer {ADMIN}"}, timeout=10
    )
    prefix = f"env-{api_key_digest(key)[:8]}"
    [record] = [r for r in response.json()["data"] if r["prefix"] == prefix]
    return key_tenant(record["id"])


def sent_to(simulator: RunningSimulator, model: str) -> list[str]:
    """The requests ``model`` received since the last check, as JSON text, oldest first."""
    return [json.dumps(r) for r in simulator.requests() if r["model"] == model]


async def _with_store(cfg: Config, work: Callable[[Store], Any]) -> Any:
    store = await Store.open(cfg.store, cfg.privacy, {})
    try:
        return await work(store)
    finally:
        await store.close()


def with_store(cfg: Config, work: Callable[[Store], Any]) -> Any:
    return asyncio.run(_with_store(cfg, work))


def _read_until(cfg: Config, read: Callable[[Store], Any], done: Callable[[Any], bool]) -> Any:
    """``read`` of the store, again until ``done`` (the alert work runs after the reply)."""
    for _ in range(200):
        value = with_store(cfg, read)
        if done(value):
            return value
        time.sleep(0.05)
    raise AssertionError(f"the store never read as expected: {value!r}")


def alert_decisions(cfg: Config, tenant: str, conversation: str) -> list[dict[str, Any]]:
    """The alert evaluations of ``tenant``'s conversation, once at least one is recorded."""
    key = scoped_conversation(tenant, conversation)
    return list(_read_until(cfg, lambda store: store.alerts.decisions(key), bool))


def settled_attempts(cfg: Config) -> None:
    """Wait until every recorded alert attempt is settled (sent or failed).

    A decision reads ``attempted`` once its attempt is on record, before the notifier has
    written: the outbox is read only after the attempt's result is recorded.
    """
    _read_until(
        cfg,
        lambda store: store.alerts.attempts(),
        lambda attempts: bool(attempts) and all(a.state != "pending" for a in attempts),
    )


def outbox_lines(outbox: Path) -> list[dict[str, Any]]:
    if not outbox.exists():
        return []
    return [json.loads(line) for line in outbox.read_text("utf-8").splitlines()]


def test_two_keys_naming_one_conversation_share_no_unknowns_trend_cap_or_alerts(
    simulator: RunningSimulator, start_server: Start, store_url: str, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    outbox = tmp_path / "alerts.jsonl"
    cfg = keyed_config(simulator, store_url, outbox, l1_daily_limit=2)
    server = start_server(cfg, ENV)
    tenant_a, tenant_b = tenant_of(server, KEY_A), tenant_of(server, KEY_B)

    # Open unknowns: A's insufficient verdict is shown to A's next review, not to B's.
    assert ask(server, KEY_A, f"supervisor-insufficient: {CALM}", "shared")["reason"] == (
        "insufficient"
    )
    ask(server, KEY_B, CALM, "shared")
    ask(server, KEY_A, CALM, "shared")
    _, reviewed_for_b, reviewed_for_a = sent_to(simulator, "supervisor-sim")
    assert MISSING not in reviewed_for_b and MISSING in reviewed_for_a

    # Trend and the conversation's daily L1 limit: A's two assessments of "trend" are
    # A's history; B's first message under that id has none and is not capped.
    simulator.load(SCENARIO)
    assert assess(server, KEY_A, CRISIS, "trend")["reasons"] == []
    assert assess(server, KEY_A, CRISIS, "trend")["trend"]["assessed_days"] == 1
    assert assess(server, KEY_A, CRISIS, "trend")["reasons"] == ["daily_cap"]
    for_b = assess(server, KEY_B, CRISIS, "trend")
    assert (for_b["status"], for_b["reasons"]) == ("ok", [])
    assert for_b["trend"]["assessed_days"] == 0
    first_a, second_a, only_b = sent_to(simulator, "l2-sim")
    assert NO_TREND in first_a and NO_TREND not in second_a and NO_TREND in only_b

    # Alerts: a guardian registered for A's conversation is reached by A's confirmed
    # crisis only; B's, under the same id, finds no consent and no contact.
    async def register(store: Store) -> None:
        service = GuardianAlerts(cfg.risk.alert, store.alerts, FileNotifier(outbox))
        await service.opt_in("guarded", tenant=tenant_a)
        contact = await service.add_contact(
            "guarded", "guardian@example.org", Locale.EN, tenant=tenant_a
        )
        await service.verify_contact(contact.id)

    with_store(cfg, register)
    assert ask(server, KEY_B, CONFIRMED, "guarded")["risk"]["confirmed"] is True
    [blocked] = alert_decisions(cfg, tenant_b, "guarded")
    assert (blocked["outcome"], blocked["reason"]) == ("blocked", "not_opted_in")
    assert outbox_lines(outbox) == []
    assert ask(server, KEY_A, CONFIRMED, "guarded")["risk"]["confirmed"] is True
    [sent] = alert_decisions(cfg, tenant_a, "guarded")
    assert sent["outcome"] == "attempted"
    settled_attempts(cfg)
    assert [line["to"] for line in outbox_lines(outbox)] == ["guardian@example.org"]


def test_rotating_conversation_ids_under_one_key_hits_the_keys_daily_cap(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    outbox = tmp_path / "alerts.jsonl"
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'rotate.db'}"
    cfg = keyed_config(simulator, store_url, outbox, l1_daily_limit_per_key=3)
    server = start_server(cfg, ENV)

    used = [assess(server, KEY_A, CRISIS, conversation) for conversation in ("r1", "r2", None)]
    capped = assess(server, KEY_A, CRISIS, "r3")
    unnamed = assess(server, KEY_A, CRISIS, None)
    confirmed = ask(server, KEY_A, CONFIRMED, "r4")

    assert [r["reasons"] for r in used] == [[], [], []]
    for result in (capped, unnamed):
        assert (result["status"], result["reasons"]) == ("unknown", ["key_daily_cap"])
        assert result["policy"] == "restricted" and result["confirmed"] is False
    # A capped crisis is answered restricted, with resources, and never alerts.
    assert confirmed["risk"] == {
        "status": "unknown",
        "level": None,
        "confirmed": False,
        "tier": "L1",
    }
    assert confirmed["policy"] == "restricted"
    assert outbox_lines(outbox) == []
    # The other key's allowance is its own.
    assert assess(server, KEY_B, CRISIS, "r1")["reasons"] == []
    assert len(sent_to(simulator, "l1-sim")) == 4


def test_a_client_key_reads_no_trace_and_an_admin_sees_whose_run_it_was(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'traces.db'}"
    server = start_server(keyed_config(simulator, store_url, tmp_path / "alerts.jsonl"), ENV)
    trace_id = ask(server, KEY_A, CALM, "shared")["trace_id"]

    def get(path: str, key: str) -> httpx.Response:
        auth = {"authorization": f"Bearer {key}"}
        return httpx.get(f"{server.base_url}{path}", headers=auth, timeout=10)

    assert get(f"/traces/{trace_id}", KEY_B).status_code == 403
    assert get("/traces", KEY_B).status_code == 403
    run = get(f"/traces/{trace_id}", ADMIN).json()["run"]
    assert run["conversation_id"] == "shared"
    assert run["meta"]["tenant"] == tenant_of(server, KEY_A)
