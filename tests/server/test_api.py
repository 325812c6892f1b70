"""``GET /v1/traces``, ``GET /v1/traces/{id}`` and ``POST /v1/assess`` in process."""

from __future__ import annotations

from typing import Any

import pytest

from foureyes.server import create_app
from foureyes.store.api_keys import api_key_digest
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, config, keyed

CALM = "I had a rough day at work and I can't sleep."
CRISIS = "I want to die."
KEY_A = "client-key-a-" + "a" * 24
KEY_B = "client-key-b-" + "b" * 24
TWO_KEYS_ENV = {"CLIENT_KEYS": f"{KEY_A},{KEY_B}", "ADMIN_KEYS": ADMIN_KEY}


def chat(content: str, **extra: Any) -> dict[str, Any]:
    return {"model": "foureyes-support", "messages": [{"role": "user", "content": content}]} | extra


async def test_a_trace_is_read_back_whole_with_its_summary() -> None:
    async with app_client(create_app(config(), {})) as client:
        reply = (await client.post("/v1/chat/completions", json=chat(CRISIS))).json()
        trace_id = reply["foureyes"]["trace_id"]
        trace = (await client.get(f"/v1/traces/{trace_id}")).json()

    assert trace["run"]["trace_id"] == trace_id and trace["run"]["kind"] == "support_message"
    assert trace["run"]["reason"] == reply["foureyes"]["reason"]
    assert [e["kind"] for e in trace["events"]][-2:] == ["decision", "delivery"]
    summary = trace["summary"]
    assert summary["triage"]["l0"]["categories"] == ["suicidal_ideation"]
    assert summary["triage"]["tier"] == "L2" and summary["triage"]["l1"]["offline"] is True
    assert summary["gate"]["candidate_sha256"] == reply["foureyes"]["candidate_sha256"]
    assert summary["delivery"]["risk"] == reply["foureyes"]["risk"]
    assert {c["role"] for c in summary["delivery"]["calls"]} == {
        "counselor",
        "risk_l1",
        "risk_l2",
        "supervisor",
    }
    assert CRISIS not in str(trace)  # no raw text unless privacy.store_raw_text


@pytest.mark.parametrize("trace_id", ["0" * 32, "not-a-trace", "A" * 32])
async def test_an_unknown_or_malformed_trace_id_is_404(trace_id: str) -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.get(f"/v1/traces/{trace_id}")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


async def test_traces_are_listed_newest_first_and_filtered() -> None:
    async with app_client(create_app(config(), {})) as client:
        calm = (await client.post("/v1/chat/completions", json=chat(CALM))).json()
        crisis = (await client.post("/v1/chat/completions", json=chat(CRISIS, user="u-2"))).json()
        everything = (await client.get("/v1/traces")).json()
        high = (await client.get("/v1/traces", params={"risk_level": "high"})).json()
        of_user = (await client.get("/v1/traces", params={"conversation_id": "u-2"})).json()
        approved = (
            await client.get(
                "/v1/traces",
                params={"reason": "approved", "kind": "support_message", "limit": 1},
            )
        ).json()
        later = (
            await client.get("/v1/traces", params={"since": "2999-01-01T00:00:00+00:00"})
        ).json()

    ids = [calm["foureyes"]["trace_id"], crisis["foureyes"]["trace_id"]]
    assert everything["object"] == "list" and everything["next_before"] is None
    assert [r["trace_id"] for r in everything["data"]] == ids[::-1]
    assert everything["data"][1]["risk"] == {
        "status": "ok",
        "level": "low",
        "tier": "L0",
        "confirmed": False,
    }
    assert [r["trace_id"] for r in high["data"]] == [ids[1]]
    assert [r["trace_id"] for r in of_user["data"]] == [ids[1]]
    assert [r["trace_id"] for r in approved["data"]] == [ids[1]]
    assert approved["next_before"] == ids[1]
    assert later["data"] == []


@pytest.mark.parametrize(
    "params",
    [
        {"since": "2026-11-30T12:00:00"},  # no time zone
        {"since": "yesterday"},
        {"until": "0.5"},  # a number is not the ISO 8601 time the document promises
        {"since": "1700000000"},
        {"until": "2026-11-30"},  # a day, no time and no zone
        {"limit": 0},
        {"limit": 1001},
        {"risk_level": "severe"},
        {"before": "xyz"},
        {"tenant": ""},
        {"tenant": "k" * 129},
    ],
)
async def test_a_bad_list_filter_is_422(params: dict[str, Any]) -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.get("/v1/traces", params=params)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_request"


async def test_the_trace_list_needs_an_admin_key() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        as_client = await client.get("/v1/traces", headers=bearer(CLIENT_KEY))
        as_admin = await client.get("/v1/traces", headers=bearer(ADMIN_KEY))
    assert (as_client.status_code, as_admin.status_code) == (403, 200)


async def test_two_keys_sharing_a_conversation_id_are_listed_each_under_its_tenant() -> None:
    admin = bearer(ADMIN_KEY)
    async with app_client(create_app(keyed(), TWO_KEYS_ENV)) as client:
        ids: dict[str, list[str]] = {}
        for key in (KEY_A, KEY_B):
            reply = await client.post(
                "/v1/chat/completions", json=chat(CALM, user="shared"), headers=bearer(key)
            )
            assess = await client.post(
                "/v1/assess", json={"text": CALM, "conversation_id": "shared"}, headers=bearer(key)
            )
            assert reply.status_code == assess.status_code == 200, (reply.text, assess.text)
            ids[key] = [reply.json()["foureyes"]["trace_id"], assess.json()["trace_id"]]
        keys = (await client.get("/v1/keys", headers=admin)).json()["data"]
        tenant = {
            key: next(
                f"key:{k['id']}" for k in keys if k["prefix"] == f"env-{api_key_digest(key)[:8]}"
            )
            for key in (KEY_A, KEY_B)
        }

        async def listed(**params: str) -> set[tuple[str, str]]:
            response = await client.get("/v1/traces", params=params, headers=admin)
            assert response.status_code == 200, response.text
            return {(run["trace_id"], run["tenant"]) for run in response.json()["data"]}

        shared = await listed(conversation_id="shared")
        of_a = await listed(tenant=tenant[KEY_A])
        of_b_shared = await listed(tenant=tenant[KEY_B], conversation_id="shared")
        nobody = await listed(tenant="key:nobody", conversation_id="shared")
        # A client key sees no run: not its own tenant's, not another's, by id or in a list.
        as_a = [
            await client.get("/v1/traces", headers=bearer(KEY_A)),
            await client.get("/v1/traces", params={"tenant": tenant[KEY_B]}, headers=bearer(KEY_A)),
            await client.get(f"/v1/traces/{ids[KEY_B][0]}", headers=bearer(KEY_A)),
            await client.get(f"/v1/traces/{ids[KEY_A][0]}", headers=bearer(KEY_A)),
        ]

    assert tenant[KEY_A] != tenant[KEY_B]
    of = {key: {(trace_id, tenant[key]) for trace_id in ids[key]} for key in (KEY_A, KEY_B)}
    assert shared == of[KEY_A] | of[KEY_B]  # one id, two tenants: two conversations
    assert of_a == of[KEY_A]
    assert of_b_shared == of[KEY_B]
    assert nobody == set()
    assert [r.status_code for r in as_a] == [403, 403, 403, 403]
    assert {r.json()["error"]["code"] for r in as_a} == {"insufficient_scope"}


async def test_an_unkeyed_callers_runs_belong_to_the_local_tenant() -> None:
    async with app_client(create_app(config(), {})) as client:
        reply = (await client.post("/v1/chat/completions", json=chat(CALM, user="u-1"))).json()
        local = (await client.get("/v1/traces", params={"tenant": "local"})).json()
        other = (await client.get("/v1/traces", params={"tenant": "key:x"})).json()

    assert [(r["trace_id"], r["tenant"]) for r in local["data"]] == [
        (reply["foureyes"]["trace_id"], "local")
    ]
    assert other["data"] == []


async def test_assess_answers_the_triage_the_applied_policy_and_resources() -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.post(
            "/v1/assess", json={"text": CRISIS, "conversation_id": "c-1", "region": "HK"}
        )
        listed = (await client.get("/v1/traces", params={"kind": "risk_triage"})).json()

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["level"], body["tier"], body["confirmed"]) == (
        "ok",
        "high",
        "L2",
        False,
    )
    assert body["l0"]["matches"][0]["term"]  # the caller sent the text: terms are shown
    assert body["applied_policy"] == {
        "applied": "restricted",
        "triage": "restricted",
        "floor": None,
    }
    assert "2389 2222" in body["resources"]  # Hong Kong's line
    assert [r["trace_id"] for r in listed["data"]] == [body["trace_id"]]


async def test_assess_of_a_calm_text_shows_no_resources() -> None:
    async with app_client(create_app(config(), {})) as client:
        body = (await client.post("/v1/assess", json={"text": CALM, "purpose": "test"})).json()
    assert (body["tier"], body["policy"], body["purpose"]) == ("L0", "normal", "test")
    assert "resources" not in body


@pytest.mark.parametrize(
    "body",
    [{}, {"text": ""}, {"text": "hi", "purpose": "calibration"}, {"text": "hi", "extra": 1}],
)
async def test_a_bad_assess_body_is_422(body: dict[str, Any]) -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.post("/v1/assess", json=body)
    assert response.status_code == 422


async def test_assess_needs_a_client_key() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        anonymous = await client.post("/v1/assess", json={"text": CALM})
        served = await client.post("/v1/assess", json={"text": CALM}, headers=bearer(CLIENT_KEY))
    assert (anonymous.status_code, served.status_code) == (401, 200)
