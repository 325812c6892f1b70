"""Restricted fallback replies: what goes out when no candidate may, chosen by reason family.

Every fallback is fixed text written here, in zh-Hans, zh-Hant and en: no model wrote it,
so nothing in it needs review. None claims to be therapy, gives a diagnosis or a phone
number (crisis resources are rendered by code and appended where the policy asks), and an
``insufficient`` fallback asks rather than pretending to know.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode

__all__ = ["FallbackFamily", "fallback_text", "family_of"]


class FallbackFamily(StrEnum):
    """The kind of fallback a reason calls for; one text per family and locale."""

    HELD_BACK = "held_back"
    """A candidate existed but was judged unfit: rejected, a rule fired, a tool it calls
    is not allowed, or the verdict named other text."""
    CANNOT_JUDGE = "cannot_judge"
    """The Supervisor said it lacks information; the reply asks instead of assuming."""
    UNAVAILABLE = "unavailable"
    """No judged candidate: drafting or review failed, or time or budget ran out."""
    PROHIBITED = "prohibited"
    """Triage forbade free generation; the reply leads to crisis resources."""


_FAMILIES: Mapping[ReasonCode, FallbackFamily] = MappingProxyType(
    {
        ReasonCode.REJECTED: FallbackFamily.HELD_BACK,
        ReasonCode.RULE_VIOLATION: FallbackFamily.HELD_BACK,
        ReasonCode.VERDICT_MISMATCH: FallbackFamily.HELD_BACK,
        ReasonCode.TOOL_NOT_ALLOWED: FallbackFamily.HELD_BACK,
        ReasonCode.INSUFFICIENT: FallbackFamily.CANNOT_JUDGE,
        ReasonCode.REVIEW_TIMEOUT: FallbackFamily.UNAVAILABLE,
        ReasonCode.REVIEW_FAILED: FallbackFamily.UNAVAILABLE,
        ReasonCode.REVIEW_MALFORMED: FallbackFamily.UNAVAILABLE,
        ReasonCode.DRAFT_FAILED: FallbackFamily.UNAVAILABLE,
        ReasonCode.DEADLINE_EXCEEDED: FallbackFamily.UNAVAILABLE,
        ReasonCode.BUDGET_EXHAUSTED: FallbackFamily.UNAVAILABLE,
        ReasonCode.GENERATION_PROHIBITED: FallbackFamily.PROHIBITED,
    }
)

_TEXTS: Mapping[FallbackFamily, Mapping[Locale, str]] = MappingProxyType(
    {
        FallbackFamily.HELD_BACK: {
            Locale.EN: "I want to be careful with what I say here, so I will keep this short: "
            "what you are going through matters, and I am listening. If you like, tell me a "
            "little more about how you are feeling right now.",
            Locale.ZH_HANS: "我想谨慎一些，所以先简短地回复你：你正在经历的事情很重要，我在听。"
            "如果你愿意，可以再多说一点你现在的感受。",
            Locale.ZH_HANT: "我想謹慎一些，所以先簡短地回覆你：你正在經歷的事情很重要，我在聽。"
            "如果你願意，可以再多說一點你現在的感受。",
        },
        FallbackFamily.CANNOT_JUDGE: {
            Locale.EN: "I do not want to assume I understand something I may not. Could you "
            "tell me a bit more about what is happening, in your own words? I am here to "
            "listen.",
            Locale.ZH_HANS: "我不想在没有真正理解的情况下妄下判断。你愿意用自己的话再多说一点"
            "正在发生的事情吗？我在这里听你说。",
            Locale.ZH_HANT: "我不想在沒有真正理解的情況下妄下判斷。你願意用自己的話再多說一點"
            "正在發生的事情嗎？我在這裡聽你說。",
        },
        FallbackFamily.UNAVAILABLE: {
            Locale.EN: "I am sorry, I cannot give you a proper reply right now. What you are "
            "going through matters. If you can, please try again in a moment, or reach out "
            "to someone you trust.",
            Locale.ZH_HANS: "抱歉，我现在没办法好好回复你。你正在经历的事情很重要。"
            "如果可以，请稍后再试，或者联系一位你信任的人。",
            Locale.ZH_HANT: "抱歉，我現在沒辦法好好回覆你。你正在經歷的事情很重要。"
            "如果可以，請稍後再試，或者聯繫一位你信任的人。",
        },
        FallbackFamily.PROHIBITED: {
            Locale.EN: "I am really glad you told me. Your safety matters most right now, "
            "and I want you to be able to talk to a person who can help straight away.",
            Locale.ZH_HANS: "谢谢你愿意告诉我。你现在的安全最重要，"
            "我希望你能马上和能够提供帮助的人谈一谈。",
            Locale.ZH_HANT: "謝謝你願意告訴我。你現在的安全最重要，"
            "我希望你能馬上和能夠提供幫助的人談一談。",
        },
    }
)


def family_of(reason: ReasonCode) -> FallbackFamily:
    """The fallback family of ``reason``.

    Raises:
        UsageError: ``reason`` is ``approved``, which has no fallback.
    """
    try:
        return _FAMILIES[reason]
    except KeyError:
        raise UsageError(f"reason {reason!r} has no fallback") from None


def fallback_text(reason: ReasonCode, locale: Locale) -> str:
    """The restricted reply for ``reason`` in ``locale`` (resources are added separately).

    Raises:
        UsageError: ``reason`` is ``approved``.
    """
    return _TEXTS[family_of(reason)][locale]
