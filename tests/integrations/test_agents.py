"""The Agents SDK guardrails against the real SDK: an ``Agent`` run by ``Runner.run``.

The agent's model is the SDK's ``OpenAIChatCompletionsModel`` over ``AsyncOpenAI`` pointed at
``foureyes simulate`` (model ``agent-sim``); the guard's Supervisor and crisis models are
models of the same simulator, so what each was sent is in its request log. Tracing is off
(no network).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    OpenAIChatCompletionsModel,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    Runner,
    ToolInputGuardrailData,
    ToolInputGuardrailTripwireTriggered,
    function_tool,
    set_tracing_disabled,
)
from agents.tool_context import ToolContext
from openai import AsyncOpenAI
from pydantic import BaseModel

from foureyes import Guard
from foureyes.config import Config, GateConfig, RolesConfig
from foureyes.core.errors import ContractError
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import PART_SEPARATOR, CrisisReply, Outcome
from foureyes.integrations.agents import (
    CheckInfo,
    ToolCallInfo,
    TriageInfo,
    chat_messages,
    check_guardrail,
    conversation_of_context,
    draft_text,
    tool_call_guardrail,
    triage_guardrail,
)
from tests.helpers.answers import APPROVE, REJECT, answer, by_message
from tests.helpers.simulator import RunningSimulator
from tests.test_docs_snippets import ROOT, snippets

CALM = "Can you book me a session with a counsellor on Thursday?"
COLD = "What are your opening hours?"
CRISIS = "I want to die, I have the pills ready."
TOOLS = "Book me a session on Thursday and delete my account."
REPLY = "I can note Thursday for you; would the morning suit you?"
COLD_REPLY = "Please refuse this draft, it is cold."
BOOKED = "Thursday is booked for you."
SCENARIO = {
    "models": {
        "agent-sim": [
            {"match": "opening hours", "content": COLD_REPLY},
            {
                "match": "^Book me",
                "tool_calls": [
                    {"name": "book_session", "arguments": {"day": "thursday"}, "id": "call_b"},
                    {"name": "delete_account", "arguments": {}, "id": "call_d"},
                ],
            },
            {"match": "was not run", "content": BOOKED},
            {"match": "^structured", "content": '{"day": "thursday", "slots": [10, 11]}'},
            {"content": REPLY},
        ],
        "supervisor-sim": [{"match": "refuse this draft", "content": REJECT}, {"content": APPROVE}],
        "l1-sim": by_message(answer("critical", 0.97)),
        "l2-sim": [{"content": answer("critical", 0.95)}],
    }
}


@pytest.fixture(autouse=True, scope="module")
def no_tracing() -> None:
    set_tracing_disabled(True)


@pytest.fixture
async def guard(simulator: RunningSimulator) -> AsyncIterator[Guard]:
    simulator.load(SCENARIO)
    roles = ("counselor", "supervisor", "l1", "l2")
    config = Config(
        routes={role: simulator.route(f"{role}-sim", timeout_s=5) for role in roles},
        roles=RolesConfig(
            counselor="counselor", supervisor="supervisor", risk_l1="l1", risk_l2="l2"
        ),
        gate=GateConfig(tools_deny=("delete_account",)),
    )
    async with Guard.open(config, store="memory") as opened:
        yield opened


@pytest.fixture
async def client(simulator: RunningSimulator) -> AsyncIterator[AsyncOpenAI]:
    """The agent's own OpenAI client, on the simulator."""
    opened = AsyncOpenAI(base_url=simulator.base_url, api_key="unused-locally", max_retries=0)
    yield opened
    await opened.close()


def agent(guard: Guard, client: AsyncOpenAI, **options: Any) -> Agent[Any]:
    return Agent(
        name="support",
        instructions="You are the support desk of a counselling service.",
        model=OpenAIChatCompletionsModel(model="agent-sim", openai_client=client),
        input_guardrails=[triage_guardrail(guard)],
        output_guardrails=[check_guardrail(guard)],
        **options,
    )


def sent_to(simulator: RunningSimulator, name: str) -> list[str]:
    return [json.dumps(r["messages"]) for r in simulator.requests() if r["model"] == f"{name}-sim"]


async def recorded(guard: Guard) -> dict[str, str]:
    return {run.trace_id: run.kind for run in await guard.store.traces.list_runs()}


async def test_a_calm_message_and_a_released_reply_pass(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    result = await Runner.run(agent(guard, client), CALM, context={"conversation_id": "c-1"})

    assert result.final_output == REPLY
    (triaged,) = result.input_guardrail_results
    (checked,) = result.output_guardrail_results
    triage, check = triaged.output.output_info, checked.output.output_info
    assert isinstance(triage, TriageInfo) and isinstance(check, CheckInfo)
    assert not triaged.output.tripwire_triggered and not checked.output.tripwire_triggered
    assert (triage.policy, triage.reason, triage.conversation_id) == (
        GenerationPolicy.NORMAL,
        None,
        "c-1",
    )
    # L1 read the calm message too (l1_policy "every") and found it low.
    assert triage.risk["tier"] == "L1" and triage.risk["confirmed"] is False
    assert (check.decision, check.reason, check.released_as_is) == (
        Outcome.RELEASED,
        ReasonCode.APPROVED,
        True,
    )
    assert check.text == REPLY
    assert check.delivered_sha256 == hashlib.sha256(REPLY.encode()).hexdigest()
    # The Supervisor reviewed the agent's reply, and both runs are on record.
    (reviewed,) = sent_to(simulator, "supervisor")
    assert REPLY in reviewed and CALM in reviewed
    runs = await recorded(guard)
    assert runs[check.trace_id] == "draft_check" and triage.trace_id in runs


async def test_a_rejected_reply_trips_the_output_guardrail_with_what_to_deliver(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    with pytest.raises(OutputGuardrailTripwireTriggered) as caught:
        await Runner.run(agent(guard, client), COLD)

    info = caught.value.guardrail_result.output.output_info
    assert isinstance(info, CheckInfo)
    assert (info.decision, info.reason, info.released_as_is) == (
        Outcome.FALLBACK,
        ReasonCode.REJECTED,
        False,
    )
    assert caught.value.guardrail_result.agent_output == COLD_REPLY
    assert COLD_REPLY not in info.text and info.text
    assert info.delivered_sha256 == hashlib.sha256(info.text.encode()).hexdigest()
    assert (await recorded(guard))[info.trace_id] == "draft_check"


async def test_a_crisis_message_trips_the_input_guardrail_before_the_agent_runs(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    with pytest.raises(InputGuardrailTripwireTriggered) as caught:
        await Runner.run(agent(guard, client), CRISIS, context={"conversation_id": "c-2"})

    info = caught.value.guardrail_result.output.output_info
    assert isinstance(info, TriageInfo)
    assert (info.policy, info.reason) == (
        GenerationPolicy.PROHIBITED,
        ReasonCode.GENERATION_PROHIBITED,
    )
    assert info.risk == {"status": "ok", "level": "critical", "confirmed": True, "tier": "L2"}
    assert info.trace_id in await recorded(guard)
    assert sent_to(simulator, "l1") and sent_to(simulator, "l2")
    # Triage ran before the agent: its model never saw the message.
    assert sent_to(simulator, "agent") == []
    # What to show instead: the code-rendered crisis reply (no region: the guidance).
    assert isinstance(info.crisis_reply, CrisisReply)
    assert info.crisis_reply == guard.crisis_reply("en")
    assert info.crisis_reply.text.startswith(guard.crisis_reply("en").wording + PART_SEPARATOR)


def docs_function(name: str) -> Any:
    """The function ``name`` that a docs/library.md snippet defines, run from the page."""
    [snippet] = [s for s in snippets(ROOT / "docs" / "library.md") if f"def {name}(" in s.code]
    namespace: dict[str, Any] = {"__name__": "__snippet__"}
    exec(compile(snippet.code, f"library.md:{snippet.line}", "exec"), namespace)  # noqa: S102
    return namespace[name]


async def test_the_docs_show_the_crisis_reply_from_the_input_tripwire(
    guard: Guard,
    client: AsyncOpenAI,
    simulator: RunningSimulator,
    capsys: pytest.CaptureFixture[str],
) -> None:
    reply_or_crisis_text = docs_function("reply_or_crisis_text")
    crisis_agent = Agent(
        name="support",
        model=OpenAIChatCompletionsModel(model="agent-sim", openai_client=client),
        input_guardrails=[triage_guardrail(guard, region="GB", locale="zh-Hant")],
        output_guardrails=[check_guardrail(guard)],
    )

    text = await reply_or_crisis_text(crisis_agent, CRISIS, "c-docs")

    expected = guard.crisis_reply("zh-Hant", "GB")
    assert text == expected.text and expected.resources
    # The resources are the registry's GB lines, in the text and as entries.
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        f"{e.name[Locale.ZH_HANT]} {' / '.join(e.numbers)}" for e in expected.resources
    ]
    assert all(number in text for e in expected.resources for number in e.numbers)
    assert sent_to(simulator, "agent") == []
    # A calm message runs the agent; the same function then returns its checked reply.
    assert await reply_or_crisis_text(crisis_agent, CALM, "c-docs-2") == REPLY


async def test_a_restricted_triage_carries_the_resources_without_tripping(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    models = dict(SCENARIO["models"])
    models["l1-sim"] = models["l2-sim"] = [{"content": answer("high", 0.9)}]
    simulator.load({"models": models})
    with pytest.raises(OutputGuardrailTripwireTriggered) as caught:
        await Runner.run(agent(guard, client), CRISIS)

    assert caught.value.run_data is not None
    (triaged,) = caught.value.run_data.input_guardrail_results
    info = triaged.output.output_info
    assert info.policy is GenerationPolicy.RESTRICTED and not triaged.output.tripwire_triggered
    assert info.crisis_reply is not None
    # The check delivered the reply with the very resource block the triage carried.
    checked = caught.value.guardrail_result.output.output_info
    assert checked.text.endswith(PART_SEPARATOR + info.crisis_reply.resources_text)


async def test_a_calm_triage_carries_no_crisis_reply(guard: Guard, client: AsyncOpenAI) -> None:
    result = await Runner.run(agent(guard, client), CALM)
    (triaged,) = result.input_guardrail_results
    assert triaged.output.output_info.crisis_reply is None


async def test_a_restricted_reply_passes_triage_but_trips_the_check_with_resources_added(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    # Crisis models that find the message high but not critical: restricted, not prohibited.
    models = dict(SCENARIO["models"])
    models["l1-sim"] = models["l2-sim"] = [{"content": answer("high", 0.9)}]
    simulator.load({"models": models})
    with pytest.raises(OutputGuardrailTripwireTriggered) as caught:
        await Runner.run(agent(guard, client), CRISIS)

    (triaged,) = caught.value.run_data.input_guardrail_results if caught.value.run_data else ()
    assert triaged.output.output_info.policy is GenerationPolicy.RESTRICTED
    assert not triaged.output.tripwire_triggered
    info = caught.value.guardrail_result.output.output_info
    assert (info.decision, info.reason, info.policy) == (
        Outcome.RELEASED,
        ReasonCode.APPROVED,
        GenerationPolicy.RESTRICTED,
    )
    # Released, but not as written: the code-rendered resources follow the reply.
    assert not info.released_as_is and info.text.startswith(REPLY) and info.text != REPLY
    assert sent_to(simulator, "agent")


def tools(ran: list[str], guard: Guard, **options: Any) -> list[Any]:
    rules = [tool_call_guardrail(guard, **options)]

    @function_tool(tool_input_guardrails=rules)
    def book_session(day: str) -> str:
        """Book a counselling session on a day."""
        ran.append(f"book_session:{day}")
        return f"booked {day}"

    @function_tool(tool_input_guardrails=rules)
    def delete_account() -> str:
        """Delete the user's account."""
        ran.append("delete_account")
        return "deleted"

    return [book_session, delete_account]


async def test_a_denied_tool_is_refused_while_an_allowed_one_runs(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    ran: list[str] = []
    result = await Runner.run(agent(guard, client, tools=tools(ran, guard)), TOOLS)

    assert ran == ["book_session:thursday"]
    infos = {
        r.output.output_info.tool: r.output.output_info for r in result.tool_input_guardrail_results
    }
    assert all(isinstance(info, ToolCallInfo) for info in infos.values())
    assert infos["book_session"].allowed and infos["book_session"].reason is None
    refused = infos["delete_account"]
    assert (refused.allowed, refused.reason) == (False, "tool_not_allowed")
    assert "gate.tools_deny" in refused.notes[0]
    # The model was told the call did not run, and its final reply passed the check.
    (_, after_tools) = sent_to(simulator, "agent")
    assert "was not run" in after_tools and "deleted" not in after_tools
    assert result.final_output == BOOKED


async def test_a_refused_tool_can_stop_the_run(guard: Guard, client: AsyncOpenAI) -> None:
    ran: list[str] = []
    chosen = tools(ran, guard, on_refusal="raise_exception")
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as caught:
        await Runner.run(agent(guard, client, tools=chosen), TOOLS)
    info = caught.value.output.output_info
    assert isinstance(info, ToolCallInfo) and info.tool == "delete_account"
    assert info.reason == "tool_not_allowed"
    assert "delete_account" not in ran


class Booking(BaseModel):
    day: str
    slots: list[int]


async def test_structured_output_is_checked_as_its_json_text(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    result = await Runner.run(agent(guard, client, output_type=Booking), "structured please")

    assert result.final_output == Booking(day="thursday", slots=[10, 11])
    info = result.output_guardrail_results[0].output.output_info
    as_json = '{"day":"thursday","slots":[10,11]}'
    assert info.released_as_is and info.text == as_json
    (reviewed,) = sent_to(simulator, "supervisor")
    assert json.dumps(as_json)[1:-1] in reviewed


@dataclass
class Slot:
    day: str


def test_draft_text_serialises_structured_output_and_refuses_what_has_no_text() -> None:
    assert draft_text("hi") == "hi"
    assert draft_text(Slot("thursday")) == '{"day":"thursday"}'
    assert draft_text({"n": [1, 2]}) == '{"n":[1,2]}'
    for unusable, kind in [(object(), "object"), (None, "NoneType"), (b"hi", "bytes")]:
        with pytest.raises(ContractError) as caught:
            draft_text(unusable)
        assert (caught.value.schema, caught.value.reason) == ("agents.output", "invalid_input")
        assert kind in caught.value.detail


async def test_an_unusable_output_is_a_typed_error_and_nothing_is_recorded(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    wrapper = RunContextWrapper(context=None, turn_input=[{"role": "user", "content": CALM}])
    with pytest.raises(ContractError) as caught:
        await check_guardrail(guard).run(wrapper, agent(guard, client), object())
    assert caught.value.detail.startswith("output")
    assert await recorded(guard) == {}


async def test_input_without_a_user_message_last_is_a_typed_error(
    guard: Guard, client: AsyncOpenAI, simulator: RunningSimulator
) -> None:
    with pytest.raises(ContractError) as caught:
        await Runner.run(agent(guard, client), [{"role": "assistant", "content": REPLY}])
    assert (caught.value.schema, caught.value.reason) == ("triage", "invalid_input")
    assert sent_to(simulator, "agent") == [] and await recorded(guard) == {}


async def test_a_call_whose_arguments_are_not_json_is_refused_unread(
    guard: Guard, client: AsyncOpenAI
) -> None:
    calls = [("{day: thursday", "invalid_input"), ("", None), ('{"day": "thursday"}', None)]
    for arguments, reason in calls:
        context = ToolContext(
            context=None, tool_name="book_session", tool_call_id="c1", tool_arguments=arguments
        )
        data = ToolInputGuardrailData(context=context, agent=agent(guard, client))
        verdict = await tool_call_guardrail(guard).run(data)
        info = verdict.output_info
        assert isinstance(info, ToolCallInfo) and info.reason == reason
        assert verdict.behavior["type"] == ("allow" if reason is None else "reject_content")
    assert info.check is not None and info.check.tool_calls[0].arguments == {"day": "thursday"}


def test_the_run_input_becomes_chat_messages() -> None:
    items: list[Any] = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": [{"type": "input_text", "text": "Hello"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi, how are you?"}],
        },
        {"type": "function_call", "call_id": "c", "name": "book", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "booked"},
        {"role": "user", "content": ""},
        {"role": "user", "content": CALM},
    ]
    assert chat_messages(items) == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi, how are you?"},
        {"role": "user", "content": CALM},
    ]
    assert chat_messages(CALM) == [{"role": "user", "content": CALM}]


@dataclass
class AppContext:
    conversation_id: str


def test_the_conversation_comes_from_the_run_context() -> None:
    assert conversation_of_context(RunContextWrapper({"conversation_id": "c-9"})) == "c-9"
    assert conversation_of_context(RunContextWrapper(AppContext("c-8"))) == "c-8"
    assert conversation_of_context(RunContextWrapper(None)) is None
    assert conversation_of_context(RunContextWrapper({"conversation_id": ""})) is None


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "foureyes.integrations.agents")
    with pytest.raises(ImportError, match=r"pip install 'foureyes\[agents\]'"):
        importlib.import_module("foureyes.integrations.agents")


def test_importing_foureyes_does_not_import_the_sdk() -> None:
    code = (
        "import json, sys, foureyes; "
        "print(json.dumps([m for m in sys.modules if m == 'agents' or 'integrations' in m]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
