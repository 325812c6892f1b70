from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from foureyes.cli import chat_cmd, trace_cmd
from foureyes.config import load_config
from foureyes.core.digest import sha256_hex
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import GateOutcome, GateRunner, ReplyRequest, Source, fallback_text
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.risk.result import RunPurpose
from foureyes.server import create_app
from foureyes.store import Store
from foureyes.store.api_keys import api_key_digest
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, bearer, keyed

runner = CliRunner()
cli = typer.Typer()
cli.add_typer(trace_cmd.app, name="trace")
cli.command("chat")(chat_cmd.chat)


def chat_ids(*messages: str) -> list[str]:
    """The trace ids of ``foureyes chat`` runs, one per message (offline)."""
    result = runner.invoke(cli, ["chat", "--json"], input="".join(f"{m}\n" for m in messages))
    assert result.exit_code == 0, result.output
    return [json.loads(line)["foureyes"]["trace_id"] for line in result.output.splitlines()]


def listed(*args: str) -> list[dict[str, object]]:
    result = runner.invoke(cli, ["trace", "list", "--json", *args])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["ok"] is True
    rows: list[dict[str, object]] = body["data"]
    return rows


def two_keys_chat(conversation_id: str) -> dict[str, str]:
    """Each key's tenant and the trace id of its one message of ``conversation_id``.

    Two client keys of the HTTP service, on the test's store, send one message each.
    """
    keys = ("client-key-a-" + "a" * 24, "client-key-b-" + "b" * 24)
    environ = {"CLIENT_KEYS": ",".join(keys), "ADMIN_KEYS": ADMIN_KEY}
    body = {
        "model": "foureyes-support",
        "messages": [{"role": "user", "content": "I had a rough day"}],
        "user": conversation_id,
    }

    async def go() -> dict[str, str]:
        async with app_client(create_app(keyed(), environ)) as client:
            sent = []
            for key in keys:
                answer = await client.post("/v1/chat/completions", json=body, headers=bearer(key))
                assert answer.status_code == 200, answer.text
                sent.append(answer.json()["foureyes"]["trace_id"])
            records = (await client.get("/v1/keys", headers=bearer(ADMIN_KEY))).json()["data"]
        ids = {record["prefix"]: record["id"] for record in records}
        return {
            f"key:{ids[f'env-{api_key_digest(key)[:8]}']}": trace_id
            for key, trace_id in zip(keys, sent, strict=True)
        }

    return asyncio.run(go())


def reply(request: ReplyRequest, purpose: RunPurpose = RunPurpose.LIVE) -> GateOutcome:
    """One offline gate run into the test's store (the one FOUREYES_STORE__URL names)."""

    async def go() -> GateOutcome:
        config = load_config(environ=os.environ)
        store = await Store.open(config.store, config.privacy, os.environ)
        try:
            caller = ModelCaller(Routes.build(config, {}), ledger=store.ledger, trace=store.traces)
            return await GateRunner(caller, traces=store.traces).reply(request, purpose=purpose)
        finally:
            await store.close()

    return asyncio.run(go())


def test_json_prints_the_whole_record() -> None:
    outcome = reply(ReplyRequest(message="I had a rough day."))

    result = runner.invoke(cli, ["trace", "show", outcome.trace_id, "--json"])

    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["ok"] is True and body["run"]["trace_id"] == outcome.trace_id
    assert body["run"]["outcome"] == "released" and body["run"]["reason"] == "approved"
    assert [e["kind"] for e in body["events"]] == ["model_call", "model_call", "decision"]
    decision = body["events"][-1]["data"]
    assert decision["candidate_sha256"] == outcome.candidate_sha256
    assert decision["delivered_sha256"] == sha256_hex(outcome.text)
    assert decision["attempts"][0]["review"]["verdict"]["decision"] == "approve"


def test_the_readable_view_says_what_went_out_and_on_what_basis() -> None:
    source = Source(id="kb:7", origin="care-guide", text="Rest helps.")
    outcome = reply(ReplyRequest(message="I had a rough day.", sources=(source,)))

    result = runner.invoke(cli, ["trace", "show", outcome.trace_id])

    assert result.exit_code == 0, result.output
    text = result.output
    assert f"Allowed out: the candidate {outcome.candidate_sha256}" in text
    assert "(offline, rules only)" in text
    assert "sources: kb:7 (care-guide)" in text
    assert "Rules in force: diagnosis_claim" in text
    assert "rules fired: none" in text and "-> approved" in text
    assert "model calls" in text


def test_the_readable_view_says_why_nothing_went_out_and_shows_the_fallback() -> None:
    outcome = reply(
        ReplyRequest(message="我不想活了", policy=GenerationPolicy.PROHIBITED, region="CN")
    )

    result = runner.invoke(cli, ["trace", "show", outcome.trace_id])

    assert result.exit_code == 0, result.output
    assert "No candidate was allowed out: generation_prohibited" in result.output
    assert result.output.count("rendered by code, digest verified") == 2
    assert fallback_text(ReasonCode.GENERATION_PROHIBITED, Locale.ZH_HANS) in result.output
    assert "12356" in result.output


def test_an_unknown_trace_exits_1() -> None:
    reply(ReplyRequest(message="hello"))  # the store exists, the id does not

    result = runner.invoke(cli, ["trace", "show", "0" * 32, "--json"])

    assert result.exit_code == 1
    body = json.loads(result.output)
    assert body == {
        "ok": False,
        "error": "TraceNotFound",
        "problems": [f"no trace {'0' * 32!r} in the store"],
    }


def test_an_unreadable_store_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOUREYES_STORE__URL", "sqlite+aiosqlite:////nonexistent-dir/x/y.db")

    result = runner.invoke(cli, ["trace", "show", "0" * 32, "--json"])

    assert result.exit_code == 1
    assert json.loads(result.output)["error"] == "StoreError"


def test_a_bad_config_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[gate]\nmax_calls = 0\n", encoding="utf-8")

    result = runner.invoke(cli, ["trace", "show", "x", "--config", str(bad), "--json"])

    assert result.exit_code == 1
    assert json.loads(result.output)["error"] == "ConfigError"


def test_list_shows_chat_runs_apart_from_eval_runs_with_the_consoles_filters() -> None:
    calm, crisis = chat_ids("I had a rough day", "I want to die")
    evaluated = reply(ReplyRequest(message="hello"), purpose=RunPurpose.TEST).trace_id
    library = reply(ReplyRequest(message="hello")).trace_id

    chat = listed()
    assert [row["trace_id"] for row in chat] == [crisis, calm]  # newest first
    assert {row["purpose"] for row in chat} == {"chat"}
    assert [row["trace_id"] for row in listed("--purpose", "eval")] == [evaluated]
    assert [row["trace_id"] for row in listed("--purpose", "other")] == [library]
    assert len(listed("--purpose", "all")) == 4
    high = listed("--risk-level", "high")
    assert [row["trace_id"] for row in high] == [crisis]
    assert high[0]["risk"] == {"status": "ok", "level": "high", "tier": "L2", "confirmed": False}
    assert listed("--reason", "approved", "--limit", "1")[0]["trace_id"] == crisis
    assert listed("--until", "2000-01-01") == []
    assert len(listed("--since", "2000-01-01", "--until", "2999-12-31T00:00:00+00:00")) == 2


def test_list_prints_one_row_per_run_and_rejects_a_time_without_a_zone() -> None:
    (trace_id,) = chat_ids("I want to die")

    result = runner.invoke(cli, ["trace", "list"])

    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if trace_id in line)
    for cell in ("chat", "released", "approved", "high L2"):
        assert cell in row
    naive = runner.invoke(cli, ["trace", "list", "--since", "2026-11-30T12:00:00"])
    assert naive.exit_code == 2 and "zone" in naive.output


def test_list_shows_each_runs_tenant_and_a_tenant_narrows_a_shared_conversation() -> None:
    by_tenant = two_keys_chat("shared")
    (local,) = chat_ids("I had a rough day")
    (a, run_a), (b, run_b) = by_tenant.items()

    everything = {row["trace_id"]: (row["tenant"], row["conversation_id"]) for row in listed()}
    assert everything[run_a] == (a, "shared") and everything[run_b] == (b, "shared")
    assert everything[local][0] == "local" and len(everything) == 3
    assert [row["trace_id"] for row in listed("--tenant", a)] == [run_a]
    assert [row["trace_id"] for row in listed("--tenant", b)] == [run_b]
    assert [row["trace_id"] for row in listed("--tenant", "local")] == [local]
    assert listed("--tenant", "key:nobody") == []

    table = runner.invoke(cli, ["trace", "list"])
    assert table.exit_code == 0, table.output
    header, *rows = table.output.splitlines()
    columns = ["trace", "started", "purpose", "kind", "tenant", "outcome", "reason", "risk"]
    assert header.split() == columns
    for trace_id, tenant in ((local, "local"), (run_a, a), (run_b, b)):
        assert next(row for row in rows if trace_id in row).split()[4] == tenant
    for bad in ("", "k" * 129):
        refused = runner.invoke(cli, ["trace", "list", "--tenant", bad, "--json"])
        assert refused.exit_code == 2 and "tenant" in refused.output


def test_show_prints_the_triage_of_a_chat_run() -> None:
    (trace_id,) = chat_ids("I want to die")

    result = runner.invoke(cli, ["trace", "show", trace_id])

    assert result.exit_code == 0, result.output
    text = result.output
    assert "Triage: level high, status ok, tier L2, path l0" in text
    assert "L0: score" in text and "escalated, matches: " in text
    assert "matches: none" not in text
    assert "Allowed out" in text


def test_show_takes_a_unique_prefix_and_refuses_an_ambiguous_or_unknown_one() -> None:
    first, second = chat_ids("hello", "hello again")
    common = len(os.path.commonprefix([first, second]))

    unique = runner.invoke(cli, ["trace", "show", second[: common + 1], "--json"])
    assert unique.exit_code == 0, unique.output
    assert json.loads(unique.output)["run"]["trace_id"] == second

    ambiguous = runner.invoke(cli, ["trace", "show", first[:common], "--json"])
    assert ambiguous.exit_code == 1
    body = json.loads(ambiguous.output)
    assert body["error"] == "AmbiguousTraceId" and first in body["problems"][0]

    for unknown in ("f" * 8, "not-hex"):
        missing = runner.invoke(cli, ["trace", "show", unknown, "--json"])
        assert missing.exit_code == 1
        assert json.loads(missing.output)["error"] == "TraceNotFound"


def _summary(trace_id: str) -> dict[str, object]:
    result = runner.invoke(cli, ["trace", "show", trace_id, "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["run"]["trace_id"] == trace_id  # the whole record is still there
    summary: dict[str, object] = body["summary"]
    return summary


def test_json_sums_up_a_released_run_as_the_readable_view_does() -> None:
    source = Source(id="kb:7", origin="care-guide", text="Rest helps.")
    outcome = reply(ReplyRequest(message="I had a rough day.", sources=(source,)))
    body = json.loads(runner.invoke(cli, ["trace", "show", outcome.trace_id, "--json"]).output)
    decision = body["events"][-1]["data"]
    review = decision["attempts"][0]["review"]

    summary = _summary(outcome.trace_id)

    assert summary["outcome"] == "released" and summary["reason"] == "approved"
    assert summary["why"] is None and summary["decision"] == "released"
    assert summary["candidate_sha256"] == outcome.candidate_sha256
    assert summary["delivered_sha256"] == sha256_hex(outcome.text)
    assert summary["delivered_chars"] == len(outcome.text)
    assert summary["verdict_sha256"] == review["verdict_sha256"]
    assert summary["reviewer_offline"] is True and summary["fallback_family"] is None
    assert summary["policy"] == decision["policy"] and summary["sources"] == 1
    assert (summary["gate_decisions"], summary["drafts"], summary["model_calls"]) == (1, 1, 2)
    assert summary["rules_fired"] == [] and summary["total_ms"] == decision["timings"]["total_ms"]
    assert summary["risk"] is None  # the gate alone: no triage


def test_json_sums_up_a_fallback_and_the_triage_of_a_chat_run() -> None:
    outcome = reply(
        ReplyRequest(message="我不想活了", policy=GenerationPolicy.PROHIBITED, region="CN")
    )
    summary = _summary(outcome.trace_id)
    assert summary["outcome"] != "released" and summary["reason"] == "generation_prohibited"
    assert summary["why"] == "triage prohibited free generation"
    assert summary["candidate_sha256"] is None and summary["verdict_sha256"] is None
    assert summary["fallback_family"] and summary["region"] == "CN"
    assert summary["delivered_sha256"] == sha256_hex(outcome.text)

    (trace_id,) = chat_ids("I want to die")
    chat = _summary(trace_id)
    assert chat["risk"] == {
        "level": "high",
        "status": "ok",
        "tier": "L2",
        "confirmed": False,
        "path": "l0",
    }
    assert chat["outcome"] == "released" and isinstance(chat["model_calls"], int)
    assert chat["model_calls"] >= 2
