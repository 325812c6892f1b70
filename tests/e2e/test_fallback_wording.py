"""Fallback wording through the real gateway: guard mode's own, and the team's texts file.

Guard mode runs under real uvicorn on loopback (``create_app``), the team's client is the
official ``openai`` SDK, and ``foureyes simulate`` serves the team's model (``team-sim``)
and the independent Supervisor (``supervisor-sim``) over HTTP. ``foureyes serve`` itself
runs as a subprocess for the start-up checks and for support mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai

from foureyes.config import Config, GateConfig, RolesConfig, ServerConfig, StoreConfig
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import ReplyMode, fallback_text
from tests.helpers.answers import APPROVE, REJECT
from tests.helpers.postgres import free_port
from tests.helpers.server import RunningServer, start_serve_process, stop_process
from tests.helpers.simulator import RunningSimulator

Start = Callable[..., RunningServer]

PERSONA = "You are Pip, the front desk of Harbour Clinic."
DELETE = "Please delete my account. refuse-me"
DELETE_ZH = "请帮我把我的账户删掉吧，谢谢。refuse-me"
GARBLE = "Please delete my account. garble-me"
REFUSED = "refuse this draft"
DESK = {
    Locale.EN: "Sorry, the front desk cannot do that here; reply 'agent' to reach a person.",
    Locale.ZH_HANS: "抱歉，前台在这里办不了这件事；回复“人工”即可联系同事。",
    Locale.ZH_HANT: "抱歉，櫃檯在這裡辦不了這件事；回覆「人工」即可聯絡同事。",
}
HELD = {
    Locale.EN: "A counsellor will read this one first; thank you for waiting.",
    Locale.ZH_HANS: "这条消息会先由咨询师阅读，谢谢你的耐心等待。",
    Locale.ZH_HANT: "這條訊息會先由諮詢師閱讀，謝謝你的耐心等待。",
}
SCENARIO = {
    "models": {
        "team-sim": [
            {"match": "refuse-me", "content": REFUSED},
            {
                "match": "garble-me",
                "content": "Done.",
                "tool_calls": [{"id": "c1", "name": "delete_account", "arguments": "{oops"}],
            },
            {"content": "Hello from the front desk."},
        ],
        "supervisor-sim": [{"match": REFUSED, "content": REJECT}, {"content": APPROVE}],
    }
}
OFFLINE_MARKER = "(?i)offline automatic reply|离线自动回复|離線自動回覆"


def entry(mode: str, name: str, texts: dict[Locale, str]) -> str:
    lines = [f"[{mode}.{name}]"]
    lines += [f'"{loc.value}" = {json.dumps(t, ensure_ascii=False)}' for loc, t in texts.items()]
    return "\n".join(lines) + "\n"


def texts_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "texts.toml"
    path.write_text(body, encoding="utf-8")
    return path


def guard_config(simulator: RunningSimulator, tmp_path: Path, texts: Path | None) -> Config:
    return Config(
        gate=GateConfig(texts_file=texts),
        store=StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 'guard.db'}"),
        routes={
            "team": simulator.route("team-sim", timeout_s=5),
            "supervisor": simulator.route("supervisor-sim", timeout_s=5),
        },
        roles=RolesConfig(counselor="team", supervisor="supervisor"),
        server=ServerConfig(mode="guard"),
    )


def ask(server: RunningServer, text: str, **options: Any) -> Any:
    client = openai.OpenAI(base_url=server.base_url, api_key="unused-locally", max_retries=0)
    messages = [{"role": "system", "content": PERSONA}, {"role": "user", "content": text}]
    return client.chat.completions.create(
        model="foureyes-support",
        messages=messages,  # type: ignore[arg-type]
        **options,
    )


def test_a_front_desk_request_that_falls_back_gets_front_desk_words(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(guard_config(simulator, tmp_path, None))

    reply = ask(server, DELETE)

    block = reply.model_extra["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "rejected")
    content = reply.choices[0].message.content
    assert content == fallback_text(ReasonCode.REJECTED, Locale.EN, mode=ReplyMode.GUARD)
    assert "going through" not in content and "feeling" not in content
    trace = httpx2.get(f"{server.base_url}/traces/{block['trace_id']}", timeout=10).json()
    assert trace["summary"]["gate"]["fallback_wording"] == {"mode": "guard", "source": "builtin"}


def test_the_teams_texts_file_sets_guard_modes_words_over_http(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    body = entry("guard", "held_back", DESK) + entry("support", "unavailable", HELD)
    server = start_server(guard_config(simulator, tmp_path, texts_file(tmp_path, body)))

    english = ask(server, DELETE)
    chinese = ask(server, DELETE_ZH)
    traditional = ask(server, DELETE, extra_body={"foureyes": {"locale": "zh-Hant"}})
    garbled = ask(server, GARBLE)
    streamed = ask(server, DELETE, stream=True)

    assert english.choices[0].message.content == DESK[Locale.EN]
    assert chinese.choices[0].message.content == DESK[Locale.ZH_HANS]
    assert traditional.choices[0].message.content == DESK[Locale.ZH_HANT]
    # A reason the file does not name (draft_failed: unavailable) in guard mode: the
    # built-in guard text, not the file's support-mode entry for that class.
    assert garbled.model_extra["foureyes"]["reason"] == "draft_failed"
    assert garbled.choices[0].message.content == fallback_text(
        ReasonCode.DRAFT_FAILED, Locale.EN, mode=ReplyMode.GUARD
    )
    assert (
        "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        == (DESK[Locale.EN])
    )
    trace_id = english.model_extra["foureyes"]["trace_id"]
    trace = httpx2.get(f"{server.base_url}/traces/{trace_id}", timeout=10).json()
    gate = trace["summary"]["gate"]
    assert gate["fallback_wording"] == {"mode": "guard", "source": "texts_file"}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"
    return env


SUPPORT_CONFIG = f"""
[gate]
texts_file = "texts.toml"
rule_patterns = {{ no_template = [{json.dumps(OFFLINE_MARKER, ensure_ascii=False)}] }}

[gate.extra_rules.no_template]
en = "No offline template."
zh-Hans = "不用离线模板。"
zh-Hant = "不用離線模板。"
"""


def test_serve_answers_support_mode_with_the_files_words(tmp_path: Path) -> None:
    # The offline Counselor's template breaks the team's rule: a held_back fallback.
    (tmp_path / "f.toml").write_text(SUPPORT_CONFIG, encoding="utf-8")
    texts_file(tmp_path, entry("support", "held_back", HELD))
    server = start_serve_process(
        ["--config", str(tmp_path / "f.toml")], env=_env(tmp_path), cwd=tmp_path
    )

    assert server.process is not None
    try:
        reply = ask(server, "I had such a long day at work.")
        reply_zh = ask(server, "今天工作好累，不想说话。")
    finally:
        stop_process(server.process)

    assert reply.model_extra["foureyes"]["reason"] == "rule_violation"
    assert reply.choices[0].message.content == HELD[Locale.EN]
    assert reply_zh.choices[0].message.content == HELD[Locale.ZH_HANS]


def test_serve_refuses_to_start_on_a_text_a_rule_refuses(tmp_path: Path) -> None:
    (tmp_path / "f.toml").write_text(SUPPORT_CONFIG, encoding="utf-8")
    bad = {**HELD, Locale.EN: "I promise a counsellor will call you on +44 20 7946 0000."}
    texts_file(tmp_path, entry("support", "held_back", bad) + '[gaurd.held_back]\nen = "x"\n')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "foureyes.cli",
            "serve",
            "--config",
            str(tmp_path / "f.toml"),
            "--port",
            str(free_port()),
            "--json",
        ],
        env=_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1, result.stdout + result.stderr
    body = json.loads(result.stdout)
    assert body["error"] == "ConfigError"
    assert body["problems"] == [
        "texts file 'texts.toml': unknown mode 'gaurd' (did you mean 'guard'?); modes are "
        "support, guard"
    ]
    # The structure first; with it fixed, every text is checked by the rules.
    texts_file(tmp_path, entry("support", "held_back", bad))
    again = subprocess.run(
        result.args, env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 1
    problems = json.loads(again.stdout)["problems"]
    assert any("support.held_back.en breaks rule guarantee_claim" in p for p in problems)
    assert any("support.held_back.en breaks rule unverified_resource" in p for p in problems)
    assert not (tmp_path / "serve.db").exists()
