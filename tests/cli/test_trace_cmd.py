from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from foureyes.cli import trace_cmd
from foureyes.config import load_config
from foureyes.core.digest import sha256_hex
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import GateOutcome, GateRunner, ReplyRequest, Source, fallback_text
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.store import Store

runner = CliRunner()
cli = typer.Typer()
cli.add_typer(trace_cmd.app, name="trace")


def reply(request: ReplyRequest) -> GateOutcome:
    """One offline gate run into the test's store (the one FOUREYES_STORE__URL names)."""

    async def go() -> GateOutcome:
        config = load_config(environ=os.environ)
        store = await Store.open(config.store, config.privacy, os.environ)
        try:
            caller = ModelCaller(Routes.build(config, {}), ledger=store.ledger, trace=store.traces)
            return await GateRunner(caller, traces=store.traces).reply(request)
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
