"""Every reason code of docs/design.md 5, produced end to end and shown by the console.

The gateway's own sweep (tests/e2e/test_gateway.py) proves each code reaches the client;
this one proves a person reading the console in real Chromium sees the same decision:
the badge, the reason code, the delivered text and the Decision card of the trail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import fallback_text
from foureyes.server import create_app
from tests.e2e.test_console_browser import Tab
from tests.e2e.test_gateway import CALM, DRAFT, SCENARIO, SWEEP, sim_config
from tests.helpers.server import RunningServer, serve_app
from tests.helpers.simulator import RunningSimulator

CASES = [*SWEEP, (CALM, ReasonCode.BUDGET_EXHAUSTED)]


@pytest.fixture(scope="module")
def servers(
    simulator_process: RunningSimulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, RunningServer]]:
    simulator_process.load(SCENARIO)
    base = tmp_path_factory.mktemp("reasons")
    normal = sim_config(simulator_process, f"sqlite+aiosqlite:///{base / 'a.db'}")
    one_call = sim_config(simulator_process, f"sqlite+aiosqlite:///{base / 'b.db'}", max_calls=1)
    with serve_app(create_app(normal, {})) as a, serve_app(create_app(one_call, {})) as b:
        yield a, b


def test_the_sweep_covers_every_reason_code() -> None:
    # The console chats in support mode, whose replies have no tool calls, so it cannot
    # produce tool_not_allowed or input_restricted, and its server's [input] stage blocks
    # nothing by default; tests/e2e/test_gateway.py produces those four through /v1/check
    # and a blocking [input] config.
    chat_reasons = set(ReasonCode) - {
        ReasonCode.TOOL_NOT_ALLOWED,
        ReasonCode.INPUT_RESTRICTED,
        ReasonCode.INPUT_BLOCKED,
        ReasonCode.INPUT_UNCHECKED,
    }
    assert {reason for _, reason in CASES} == chat_reasons


@pytest.mark.parametrize(("text", "reason"), CASES, ids=[r.value for _, r in CASES])
def test_the_console_shows_each_decision_as_it_was_made(
    chromium: Browser,
    servers: tuple[RunningServer, RunningServer],
    simulator_process: RunningSimulator,
    text: str,
    reason: ReasonCode,
    tmp_path: Path,
) -> None:
    simulator_process.load(SCENARIO)
    normal, one_call = servers
    server = one_call if reason is ReasonCode.BUDGET_EXHAUSTED else normal
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    tab = Tab(context.new_page(), server.url)
    tab.page.on("pageerror", lambda error: tab.errors.append(str(error)))
    try:
        tab.open()
        turn = tab.send(text)

        released = reason is ReasonCode.APPROVED
        expect(turn.locator(".who .badge")).to_have_text("Released" if released else "Fallback")
        expect(turn.locator(".who .reason .code-raw")).to_have_text(reason.value)
        decision = turn.locator(".card").filter(has=tab.page.locator("h3, h4", has_text="Decision"))
        expect(decision.locator(".reason .code-raw")).to_have_text(reason.value)
        reply = turn.locator(".reply-text")
        if released:
            expect(reply).to_have_text(DRAFT)
        elif reason is ReasonCode.GENERATION_PROHIBITED:
            expect(reply).not_to_contain_text(DRAFT)
        else:
            expect(reply).to_have_text(fallback_text(reason, Locale.EN))
        tab.page.screenshot(path=str(tmp_path / f"{reason.value}.png"))
        assert tab.errors == []
    finally:
        context.close()
