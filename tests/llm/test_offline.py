"""The offline engine: deterministic, honest about being offline, and never inventing output."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from importlib import resources

import pytest

from foureyes.config import RouteConfig
from foureyes.core.errors import RouteBadResponse, RouteTimeout, UsageError
from foureyes.core.locale import Locale, detect_locale
from foureyes.core.roles import Role
from foureyes.llm.offline import (
    OFFLINE_MODEL,
    OfflineProvider,
    offline_responder,
    offline_roles,
    unregister_offline_responder,
)
from foureyes.llm.provider import ChatMessage, ChatRequest, Provider
from foureyes.llm.routes import build_provider

MARKERS = {
    Locale.EN: "[Offline automatic reply] ",
    Locale.ZH_HANS: "【离线自动回复】",
    Locale.ZH_HANT: "【離線自動回覆】",
}
MESSAGES = {
    Locale.EN: ["I can't sleep and I feel alone.", "Work is too much lately.", "hi"],
    Locale.ZH_HANS: ["我最近压力很大，睡不着。", "我觉得好孤单", "为什么没人理我"],
    Locale.ZH_HANT: ["我最近壓力很大，睡不著。", "我覺得好孤單", "為什麼沒人理我"],
}


def counselor_request(*user_texts: str) -> ChatRequest:
    messages = [ChatMessage.system("You are a supportive counselor.")]
    for text in user_texts:
        messages += [ChatMessage.user(text), ChatMessage(role="assistant", content="ok")]
    return ChatRequest(messages=tuple(messages[:-1]), role=Role.COUNSELOR)


@pytest.fixture
def provider() -> Provider:
    return build_provider("offline", RouteConfig(kind="offline"), {})


def test_built_through_the_route_registry(provider: Provider) -> None:
    assert isinstance(provider, OfflineProvider)
    assert provider.route == "offline"


@pytest.mark.parametrize("locale", list(Locale))
async def test_counselor_replies_in_the_users_language(provider: Provider, locale: Locale) -> None:
    for text in MESSAGES[locale]:
        result = await provider.complete(counselor_request(text), timeout_s=5)
        assert result.text.startswith(MARKERS[locale])
        assert detect_locale(result.text) is locale
        assert result.offline is True
        assert result.model == OFFLINE_MODEL
        assert result.route == "offline"
        assert result.finish_reason == "stop"
        assert result.usage.total_tokens == 0
        assert result.latency_s >= 0


async def test_same_input_same_bytes_across_instances() -> None:
    first, second = OfflineProvider("a"), OfflineProvider("b")
    for texts in MESSAGES.values():
        for text in texts:
            a = await first.complete(counselor_request(text), timeout_s=5)
            b = await second.complete(counselor_request(text), timeout_s=5)
            assert a.text.encode() == b.text.encode()


async def test_reply_follows_the_last_user_message(provider: Provider) -> None:
    request = counselor_request("I feel bad.", "我最近压力很大")
    result = await provider.complete(request, timeout_s=5)
    assert result.text.startswith(MARKERS[Locale.ZH_HANS])


async def test_templates_vary_with_the_message(provider: Provider) -> None:
    texts = [f"message number {n}" for n in range(30)]
    replies = {(await provider.complete(counselor_request(t), timeout_s=5)).text for t in texts}
    assert len(replies) > 1


async def test_no_user_message_still_answers_in_english(provider: Provider) -> None:
    request = ChatRequest(messages=(ChatMessage.system("s"),), role=Role.COUNSELOR)
    result = await provider.complete(request, timeout_s=5)
    assert result.text.startswith(MARKERS[Locale.EN])


def test_every_template_is_safe_and_in_its_language() -> None:
    path = resources.files("foureyes.llm").joinpath("offline_templates/counselor.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert set(data["marker"]) == set(data["replies"]) == set(Locale)
    for locale, replies in data["replies"].items():
        assert replies
        for reply in replies:
            assert detect_locale(reply) is Locale(locale)
            # No phone numbers, hotlines or links: resources come from the risk registry.
            assert not re.search(r"\d|http|www|hotline|热线|熱線", reply, re.IGNORECASE)
            assert not re.search(r"diagnos|therap|诊断|診斷|治疗|治療", reply, re.IGNORECASE)
            assert len(reply) <= 200


async def test_request_without_role_is_a_bad_response(provider: Provider) -> None:
    request = ChatRequest(messages=(ChatMessage.user("hello"),))
    with pytest.raises(RouteBadResponse):
        await provider.complete(request, timeout_s=5)


@pytest.fixture
def free_role() -> Iterator[Role]:
    """The selector role with no responder, whatever is registered, restored afterwards."""
    role = Role.SELECTOR
    previous = unregister_offline_responder(role) if role in offline_roles() else None
    try:
        yield role
    finally:
        if role in offline_roles():
            unregister_offline_responder(role)
        if previous is not None:
            offline_responder(role)(previous)


async def test_role_without_responder_is_a_bad_response(
    provider: Provider, free_role: Role
) -> None:
    request = ChatRequest(messages=(ChatMessage.user('{"x": 1}'),), role=free_role)
    with pytest.raises(RouteBadResponse) as caught:
        await provider.complete(request, timeout_s=5)
    assert caught.value.route == "offline"
    assert f"no responder for role {free_role}" in caught.value.detail


async def test_registered_responder_answers_its_role(provider: Provider, free_role: Role) -> None:
    seen: list[ChatRequest] = []

    @offline_responder(free_role)
    def select(request: ChatRequest) -> str:
        seen.append(request)
        return '{"selections": []}'

    request = ChatRequest(
        messages=(ChatMessage.user("pick"),), role=free_role, subject={"catalog": "c1"}
    )
    result = await provider.complete(request, timeout_s=5)
    assert result.text == '{"selections": []}'
    assert result.offline is True
    assert seen == [request]
    assert free_role in offline_roles()
    assert unregister_offline_responder(free_role) is select
    assert free_role not in offline_roles()


def test_a_role_cannot_get_two_responders(free_role: Role) -> None:
    offline_responder(free_role)(lambda request: "one")
    with pytest.raises(UsageError):
        offline_responder(free_role)(lambda request: "two")


def test_unregistering_a_missing_responder_is_misuse(free_role: Role) -> None:
    with pytest.raises(UsageError):
        unregister_offline_responder(free_role)


async def test_responder_slower_than_the_timeout_is_a_timeout() -> None:
    ticks = iter([0.0, 2.5])
    provider = OfflineProvider("slow", clock=lambda: next(ticks))
    with pytest.raises(RouteTimeout) as caught:
        await provider.complete(counselor_request("hi"), timeout_s=2.0)
    assert caught.value.timeout_s == 2.0


async def test_latency_is_measured() -> None:
    ticks = iter([10.0, 10.25])
    provider = OfflineProvider("x", clock=lambda: next(ticks))
    result = await provider.complete(counselor_request("hi"), timeout_s=1)
    assert result.latency_s == 0.25


async def test_closed_provider_refuses_calls(provider: Provider) -> None:
    await provider.aclose()
    with pytest.raises(UsageError):
        await provider.complete(counselor_request("hi"), timeout_s=5)
