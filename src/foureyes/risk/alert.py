"""Guardian-alert preconditions and the alert message: pure decisions, no I/O.

An alert is sent only when every precondition holds (docs/design.md 4, invariant 5):

1. the triage was double-confirmed;
2. the user opted in (a recorded, unrevoked consent);
3. a verified guardian contact exists;
4. alerts are enabled for the deployment;
5. no alert reached that contact within the cooldown (default 24 h);
6. the deployment's daily alert cap is not reached;
7. no attempt exists for the same episode (the database also refuses a duplicate);
8. the triage is live, not a test, simulation or calibration (those are recorded apart);
9. the message is one of the fixed templates, so it carries no conversation content;
10. the attempt is recorded before sending, and its outcome after
    (:mod:`foureyes.risk.guardian` does that; a failed write means nothing is sent).

:func:`decide_alert` checks 1 to 9 over facts the alert service gathered; any unmet one
blocks the alert, and the first is the recorded reason.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from foureyes.core.locale import Locale
from foureyes.risk.result import RunPurpose

__all__ = [
    "ALERT_TEMPLATES",
    "AlertBlock",
    "AlertFacts",
    "alert_message",
    "decide_alert",
    "episode_of",
    "is_template",
]


class AlertBlock(StrEnum):
    """Why an alert was not sent: the precondition that failed, in precondition order."""

    NOT_CONFIRMED = "not_confirmed"
    """1: the triage was not double-confirmed."""
    NOT_OPTED_IN = "not_opted_in"
    """2: no active opt-in (never given, or revoked)."""
    NO_VERIFIED_CONTACT = "no_verified_contact"
    """3: no verified, unrevoked guardian contact."""
    DISABLED = "disabled"
    """4: alerts are not enabled for this deployment."""
    COOLDOWN = "cooldown"
    """5: the contact was alerted within the cooldown."""
    DAILY_CAP = "daily_cap"
    """6: the deployment reached its daily alert cap."""
    DUPLICATE_EPISODE = "duplicate_episode"
    """7: an attempt for this episode already exists."""
    TEST_RUN = "test_run"
    """8: a test, simulation or calibration triage; recorded apart, never sent."""
    MESSAGE_NOT_TEMPLATE = "message_not_template"
    """9: the message is not exactly one of the fixed templates."""
    RECORD_FAILED = "record_failed"
    """10: the attempt could not be recorded before sending, so nothing was sent."""
    STORE_FAILED = "store_failed"
    """The alert records could not be read, so no precondition could be checked."""


ALERT_TEMPLATES: dict[Locale, str] = {
    Locale.EN: (
        "Safety notice: someone who named you as their trusted contact may need support "
        "right now. Please reach out to them directly. If you believe they are in immediate "
        "danger, call your local emergency number. This automated message contains nothing "
        "of their conversation."
    ),
    Locale.ZH_HANS: (
        "【安全提醒】一位将你登记为紧急联系人的用户此刻可能需要支持。请直接联系对方。"
        "如果你认为对方正处于紧急危险中，请拨打当地紧急电话。此自动消息不含对方的任何对话内容。"
    ),
    Locale.ZH_HANT: (
        "【安全提醒】一位將你登記為緊急聯絡人的用戶此刻可能需要支持。請直接聯絡對方。"
        "如果你認為對方正處於緊急危險中，請撥打當地緊急電話。此自動訊息不含對方的任何對話內容。"
    ),
}
"""The only texts an alert can carry: fixed, with no placeholder for any user content."""


def alert_message(locale: Locale) -> str:
    """The alert text for a guardian reading ``locale``."""
    return ALERT_TEMPLATES[locale]


def is_template(message: str) -> bool:
    """Whether ``message`` is exactly one of the fixed templates."""
    return message in ALERT_TEMPLATES.values()


def episode_of(at: dt.datetime) -> str:
    """The default episode of an alert: the UTC day.

    A crisis that continues past midnight is held back by the cooldown instead.
    """
    return at.astimezone(dt.UTC).date().isoformat()


@dataclass(frozen=True, slots=True)
class AlertFacts:
    """Everything the preconditions look at, gathered by the alert service."""

    confirmed: bool
    """The triage's double confirmation."""
    opted_in: bool
    """Whether an unrevoked opt-in exists."""
    contact_verified: bool
    """Whether a verified, unrevoked contact exists."""
    enabled: bool
    """``risk.alert.enabled``."""
    now: dt.datetime
    """The time of the decision."""
    last_alert_to_contact: dt.datetime | None
    """The newest attempt to the contact that may have reached it."""
    cooldown: dt.timedelta
    """``risk.alert.cooldown_h``."""
    attempts_today: int
    """Live attempts recorded today (UTC) across the deployment."""
    daily_cap: int
    """``risk.alert.daily_cap``."""
    episode_attempted: bool
    """Whether an attempt for the episode already exists."""
    purpose: RunPurpose
    """Why the triage ran."""
    message: str
    """The message that would be sent."""


def decide_alert(facts: AlertFacts) -> tuple[AlertBlock, ...]:
    """The unmet preconditions 1 to 9, in order; empty means the alert may be attempted."""
    unmet: list[AlertBlock] = []
    if not facts.confirmed:
        unmet.append(AlertBlock.NOT_CONFIRMED)
    if not facts.opted_in:
        unmet.append(AlertBlock.NOT_OPTED_IN)
    if not facts.contact_verified:
        unmet.append(AlertBlock.NO_VERIFIED_CONTACT)
    if not facts.enabled:
        unmet.append(AlertBlock.DISABLED)
    if (
        facts.last_alert_to_contact is not None
        and facts.now - facts.last_alert_to_contact < facts.cooldown
    ):
        unmet.append(AlertBlock.COOLDOWN)
    if facts.attempts_today >= facts.daily_cap:
        unmet.append(AlertBlock.DAILY_CAP)
    if facts.episode_attempted:
        unmet.append(AlertBlock.DUPLICATE_EPISODE)
    if facts.purpose is not RunPurpose.LIVE:
        unmet.append(AlertBlock.TEST_RUN)
    if not is_template(facts.message):
        unmet.append(AlertBlock.MESSAGE_NOT_TEMPLATE)
    return tuple(unmet)
