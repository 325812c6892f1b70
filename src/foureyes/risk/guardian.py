"""The guardian-alert service: consent and contacts, preconditions, write-ahead delivery.

:meth:`GuardianAlerts.consider` takes a finished triage and either records why no alert
goes out (the first unmet precondition of :mod:`foureyes.risk.alert`) or records a
``pending`` attempt and only then calls the notifier, recording every try and its
outcome. A failed send is retried up to ``risk.alert.max_send_attempts`` times and
ends ``failed`` in the store: never silently lost. The service never sees the
conversation's text: the message is a fixed template in the guardian's language.

Consent and contacts belong to a conversation *under its tenant*
(:mod:`foureyes.core.tenancy`): register them with the tenant the conversation's messages
come with (``key:<key id>`` for an API key's, ``local`` by default), and only that
tenant's confirmed triages can meet them. Another key naming the same conversation id
has a conversation of its own, with no consent and no contact.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from foureyes.config import AlertConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import StoreError, UsageError
from foureyes.core.locale import Locale
from foureyes.core.tenancy import LOCAL_TENANT, scoped_conversation
from foureyes.risk.alert import AlertBlock, AlertFacts, alert_message, decide_alert, episode_of
from foureyes.risk.notifiers import AlertMessage, Notifier
from foureyes.risk.result import TriageResult
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store.alerts import AttemptLimits, AttemptState, SqlAlertRecords
from foureyes.store.consent import Contact, OptIn

__all__ = ["AlertOutcome", "AlertStatus", "GuardianAlerts"]

_log = logging.getLogger(__name__)
_MAX_EPISODE = 64


class AlertStatus(StrEnum):
    """What became of one alert evaluation."""

    BLOCKED = "blocked"
    """A precondition failed; nothing was sent (``reason`` says which)."""
    SENT = "sent"
    """The notifier accepted the message."""
    FAILED = "failed"
    """Every try failed; the attempt is recorded ``failed`` with the last error."""


@dataclass(frozen=True, slots=True)
class AlertOutcome:
    """The result of :meth:`GuardianAlerts.consider`."""

    status: AlertStatus
    """Blocked, sent or failed."""
    reason: AlertBlock | None = None
    """The first unmet precondition, when blocked."""
    unmet: tuple[AlertBlock, ...] = ()
    """Every unmet precondition, when blocked."""
    attempt_id: str | None = None
    """The recorded attempt, when one was made."""
    tries: int = 0
    """Delivery tries made."""
    error: str | None = None
    """The last delivery error, when failed."""

    @property
    def sent(self) -> bool:
        """Whether a guardian was notified."""
        return self.status is AlertStatus.SENT


class GuardianAlerts:
    """Guardian alerts for one deployment, over the store's alert records."""

    def __init__(
        self,
        config: AlertConfig,
        records: SqlAlertRecords,
        notifier: Notifier,
        *,
        clock: WallClock = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Check with ``config``, record in ``records``, deliver with ``notifier``."""
        self.config = config
        self._records = records
        self._notifier = notifier
        self._clock = clock
        self._sleep = sleep

    def _now(self) -> dt.datetime:
        return require_utc(self._clock(), "the alert clock")

    # --- consent and contacts -----------------------------------------------------------

    async def opt_in(self, conversation_id: str, *, tenant: str = LOCAL_TENANT) -> OptIn:
        """Record the user's consent to guardian alerts for ``tenant``'s conversation, now."""
        conversation = scoped_conversation(tenant, conversation_id)
        return await self._records.opt_in(conversation, at=self._now())

    async def revoke_opt_in(self, conversation_id: str, *, tenant: str = LOCAL_TENANT) -> int:
        """Revoke the user's consent, now; returns how many consents were active."""
        conversation = scoped_conversation(tenant, conversation_id)
        return await self._records.revoke_opt_in(conversation, at=self._now())

    async def add_contact(
        self, conversation_id: str, address: str, locale: Locale, *, tenant: str = LOCAL_TENANT
    ) -> Contact:
        """Register an unverified guardian contact reading ``locale``.

        The contact belongs to ``tenant``'s conversation ``conversation_id``.
        """
        return await self._records.add_contact(
            scoped_conversation(tenant, conversation_id),
            address,
            locale=Locale(locale).value,
            at=self._now(),
        )

    async def verify_contact(self, contact_id: str) -> None:
        """Mark a contact verified, once the out-of-band check has succeeded."""
        await self._records.verify_contact(contact_id, at=self._now())

    async def revoke_contact(self, contact_id: str) -> None:
        """Revoke a contact; it is never alerted again."""
        await self._records.revoke_contact(contact_id, at=self._now())

    # --- alerting -----------------------------------------------------------------------

    async def consider(self, result: TriageResult, *, episode: str | None = None) -> AlertOutcome:
        """Alert the guardian if, and only if, every precondition holds.

        The evaluation is recorded either way.

        Args:
            result: a finished triage.
            episode: names the crisis episode for de-duplication (at most 64 characters);
                default: the UTC day.

        Raises:
            UsageError: ``episode`` is longer than 64 characters.
        """
        now = self._now()
        episode = episode if episode is not None else episode_of(now)
        if len(episode) > _MAX_EPISODE:
            raise UsageError(f"an episode name has at most {_MAX_EPISODE} characters")
        conversation = result.conversation_key
        try:
            facts, contact = await self._facts(result, episode, now)
        except StoreError as exc:
            # Invariant 5: preconditions that cannot be checked do not hold.
            _log.warning("alert records unreadable, no alert: %s", exc)
            return await self._blocked(result, episode, None, (AlertBlock.STORE_FAILED,), now)
        unmet = decide_alert(facts)
        contact_id = None if contact is None else contact.id
        if unmet or contact is None:
            return await self._blocked(result, episode, contact_id, unmet, now)
        message_text = facts.message
        try:
            # The rate limits are checked again where the attempt is taken: concurrent
            # evaluations may all have read them as free above.
            start = await self._records.begin_attempt(
                at=now,
                conversation_id=conversation,
                episode=episode,
                assessment_id=result.assessment_id,
                contact_id=contact.id,
                message_sha256=sha256_hex(message_text),
                notifier=self._notifier.kind,
                limits=AttemptLimits(
                    cooldown=facts.cooldown,
                    daily_cap=facts.daily_cap,
                    day_start=_day_start(now),
                    cooldown_reason=AlertBlock.COOLDOWN.value,
                    cap_reason=AlertBlock.DAILY_CAP.value,
                    duplicate_reason=AlertBlock.DUPLICATE_EPISODE.value,
                ),
            )
        except StoreError as exc:
            # Precondition 10: an attempt that is not on record is never made.
            _log.warning("alert attempt not recorded, nothing sent: %s", exc)
            return await self._blocked(
                result, episode, contact.id, (AlertBlock.RECORD_FAILED,), now
            )
        if start.attempt_id is None:
            block = AlertBlock(start.blocked or AlertBlock.DUPLICATE_EPISODE.value)
            return AlertOutcome(AlertStatus.BLOCKED, block, (block,))
        message = AlertMessage(
            alert_id=start.attempt_id,
            address=contact.address,
            locale=Locale(contact.locale),
            text=message_text,
        )
        return await self._deliver(message)

    async def _facts(
        self, result: TriageResult, episode: str, now: dt.datetime
    ) -> tuple[AlertFacts, Contact | None]:
        conversation = result.conversation_key
        opt_in = await self._records.active_opt_in(conversation)
        contact = await self._records.verified_contact(conversation)
        last = None if contact is None else await self._records.last_alert_to(contact.id)
        attempts_today = await self._records.attempts_since(_day_start(now))
        episode_attempted = contact is not None and await self._records.episode_attempted(
            conversation, contact.id, episode
        )
        locale = Locale.EN if contact is None else Locale(contact.locale)
        facts = AlertFacts(
            confirmed=result.confirmed,
            opted_in=opt_in is not None,
            contact_verified=contact is not None,
            enabled=self.config.enabled,
            now=now,
            last_alert_to_contact=last,
            cooldown=dt.timedelta(hours=self.config.cooldown_h),
            attempts_today=attempts_today,
            daily_cap=self.config.daily_cap,
            episode_attempted=episode_attempted,
            purpose=result.purpose,
            message=alert_message(locale),
        )
        return facts, contact

    async def _blocked(
        self,
        result: TriageResult,
        episode: str,
        contact_id: str | None,
        unmet: tuple[AlertBlock, ...],
        now: dt.datetime,
    ) -> AlertOutcome:
        reason = unmet[0]
        try:
            await self._records.record_blocked(
                at=now,
                purpose=result.purpose.value,
                conversation_id=result.conversation_key,
                episode=episode,
                assessment_id=result.assessment_id,
                contact_id=contact_id,
                reason=reason.value,
            )
        except StoreError as exc:
            # Nothing is sent either way; the log keeps the reason the store could not.
            _log.warning("blocked alert (%s) not recorded: %s", reason.value, exc)
        return AlertOutcome(AlertStatus.BLOCKED, reason, unmet)

    async def _deliver(self, message: AlertMessage) -> AlertOutcome:
        attempts = self.config.max_send_attempts
        error: str | None = None
        for tries in range(1, attempts + 1):
            if tries > 1:
                await self._sleep(self.config.retry_backoff_s)
            delivery = await self._notifier.send(message)
            if delivery.delivered:
                await self._settle(message.alert_id, tries, None, "sent")
                return AlertOutcome(AlertStatus.SENT, attempt_id=message.alert_id, tries=tries)
            error = delivery.detail or "not delivered"
            await self._settle(
                message.alert_id, tries, error, "failed" if tries == attempts else "pending"
            )
        return AlertOutcome(
            AlertStatus.FAILED, attempt_id=message.alert_id, tries=attempts, error=error
        )

    async def _settle(
        self, attempt_id: str, tries: int, error: str | None, state: AttemptState
    ) -> None:
        try:
            await self._records.record_try(
                attempt_id, tries=tries, error=error, state=state, at=self._now()
            )
        except StoreError as exc:
            # The attempt stays ``pending`` in the store, where an operator sees it.
            _log.warning("outcome of alert attempt %s not recorded: %s", attempt_id, exc)


def _day_start(now: dt.datetime) -> dt.datetime:
    """Midnight UTC of ``now``'s day: the daily cap counts attempts since then."""
    return dt.datetime.combine(now.date(), dt.time(), tzinfo=dt.UTC)
