"""``Guard``'s fallback wording: guard mode's own, and a team's ``[gate] texts_file``.

Offline default routes (no model): the offline Supervisor judges a caller's draft
``insufficient``, and a ``[gate] rule_patterns`` rule that the offline Counselor's
template breaks makes ``Guard.reply`` fall back (``rule_violation``), so both modes'
fallbacks are reached through the real pipeline and store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foureyes import Guard, SyncGuard
from foureyes.config import Config, GateConfig
from foureyes.core.errors import ConfigError, ContractError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import PART_SEPARATOR, Outcome, ReplyMode, fallback_text
from foureyes.risk.resources import render_resources

DELETE = "Please delete my account."
DELETE_ZH = "请帮我删除我的账户。"
DRAFT = "Done, your account is gone."
ASKS = {
    Locale.EN: "Which account should we look at? Send us its e-mail address, please.",
    Locale.ZH_HANS: "请问是哪个账户？请把它的邮箱地址发给我们。",
    Locale.ZH_HANT: "請問是哪個帳戶？請把它的郵箱地址發給我們。",
}
HELD = {
    Locale.EN: "A counsellor will read this one first; thank you for waiting.",
    Locale.ZH_HANS: "这条消息会先由咨询师阅读，谢谢你的耐心等待。",
    Locale.ZH_HANT: "這條訊息會先由諮詢師閱讀，謝謝你的耐心等待。",
}
OFFLINE_MARKER = "(?i)offline automatic reply|离线自动回复|離線自動回覆"


def texts_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "texts.toml"
    path.write_text(body, encoding="utf-8")
    return path


def entry(mode: str, name: str, texts: dict[Locale, str]) -> str:
    lines = [f"[{mode}.{name}]"]
    lines += [f'"{loc.value}" = {json.dumps(t, ensure_ascii=False)}' for loc, t in texts.items()]
    return "\n".join(lines) + "\n"


def config(tmp_path: Path, body: str | None) -> Config:
    gate = GateConfig(
        extra_rules={"no_template": {loc: "No offline template." for loc in Locale}},
        rule_patterns={"no_template": (OFFLINE_MARKER,)},
        texts_file=None if body is None else texts_file(tmp_path, body),
    )
    return Config(gate=gate)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_a_checked_front_desk_draft_falls_back_with_front_desk_words() -> None:
    async with Guard.open(store="memory") as guard:
        outcome = await guard.check(user(DELETE), DRAFT)

    assert (outcome.decision, outcome.reason) == (Outcome.FALLBACK, ReasonCode.INSUFFICIENT)
    assert outcome.text == fallback_text(ReasonCode.INSUFFICIENT, Locale.EN, mode=ReplyMode.GUARD)
    # Not the emotional-support wording of support mode.
    assert "in your own words" not in outcome.text and "listen" not in outcome.text


async def test_the_teams_words_replace_the_fallback_per_mode_and_locale(tmp_path: Path) -> None:
    body = entry("guard", "cannot_judge", ASKS) + entry("support", "held_back", HELD)
    async with Guard.open(config(tmp_path, body), store="memory") as guard:
        checked = await guard.check(user(DELETE), DRAFT)
        checked_zh = await guard.check(user(DELETE_ZH), DRAFT)
        checked_hant = await guard.check(user(DELETE), DRAFT, locale="zh-Hant")
        replied = await guard.reply(user("I had a long day at work."))
        replied_zh = await guard.reply(user("今天工作好累。"))
        runs = {run.trace_id: run for run in await guard.store.traces.list_runs()}

    assert checked.reason is ReasonCode.INSUFFICIENT and checked.text == ASKS[Locale.EN]
    assert checked_zh.text == ASKS[Locale.ZH_HANS]
    assert checked_hant.text == ASKS[Locale.ZH_HANT]
    # support mode (foureyes' Counselor drafted): its own entry, not guard mode's.
    assert replied.reason is ReasonCode.RULE_VIOLATION and replied.text == HELD[Locale.EN]
    assert replied_zh.text == HELD[Locale.ZH_HANS]
    assert {checked.trace_id, replied.trace_id} <= set(runs)


async def test_what_the_file_does_not_name_keeps_the_built_in_words(tmp_path: Path) -> None:
    body = entry("support", "held_back", HELD)
    async with Guard.open(config(tmp_path, body), store="memory") as guard:
        checked = await guard.check(user(DELETE), DRAFT)
    assert checked.text == fallback_text(ReasonCode.INSUFFICIENT, Locale.EN, mode=ReplyMode.GUARD)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('[guard.cannot_judg]\nen = "x"\n', "(did you mean 'cannot_judge'?)"),
        ('[guard.cannot_judge]\nen = "Sorry."\n', "guard.cannot_judge lacks zh-Hans, zh-Hant"),
        (
            entry("guard", "cannot_judge", {**ASKS, Locale.EN: "I guarantee a quick answer."}),
            "guard.cannot_judge.en breaks rule guarantee_claim",
        ),
        (
            entry("guard", "cannot_judge", {**ASKS, Locale.EN: "Offline automatic reply: wait."}),
            "guard.cannot_judge.en breaks rule no_template",
        ),
        ("not = [toml", "is not valid TOML"),
    ],
)
async def test_a_guard_does_not_open_on_a_bad_texts_file(
    tmp_path: Path, body: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        async with Guard.open(config(tmp_path, body), store="memory"):
            pass
    assert any(problem in p for p in caught.value.problems), caught.value.problems


async def test_the_crisis_reply_keeps_the_resources_after_the_teams_words(
    tmp_path: Path,
) -> None:
    words = {
        Locale.EN: "Please talk to someone now; you matter to us.",
        Locale.ZH_HANS: "请现在就找人聊一聊，你对我们很重要。",
        Locale.ZH_HANT: "請現在就找人聊一聊，你對我們很重要。",
    }
    async with Guard.open(
        config(tmp_path, entry("guard", "prohibited", words)), store="memory"
    ) as guard:
        reply = guard.crisis_reply("zh-Hans", "CN")
        support = guard.crisis_reply("en", "GB", mode="support")
        with pytest.raises(ContractError) as bad_locale:
            guard.crisis_reply("fr")
        with pytest.raises(ContractError) as bad_region:
            guard.crisis_reply("en", "gb")

    assert reply.wording == words[Locale.ZH_HANS]
    assert reply.text == words[Locale.ZH_HANS] + PART_SEPARATOR + render_resources(
        Locale.ZH_HANS, "CN"
    )
    assert "12356" in reply.text and {e.region for e in reply.resources} == {"CN"}
    assert support.wording == fallback_text(ReasonCode.GENERATION_PROHIBITED, Locale.EN)
    assert support.resources_text == render_resources(Locale.EN, "GB")
    assert bad_locale.value.schema == "crisis_reply" and "locale" in bad_locale.value.detail
    assert "region" in bad_region.value.detail


def test_a_sync_guard_gives_the_crisis_reply_too() -> None:
    with SyncGuard.open(store="memory") as guard:
        reply = guard.crisis_reply("en")
    # No region: no other country's lines, the international guidance instead.
    assert reply.resources == () and reply.text.endswith(render_resources(Locale.EN, None))
