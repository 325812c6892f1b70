"""Consent and guardian contacts in the store: who opted in, and whom an alert may reach.

Times are passed in by the caller (the alert service owns its clock).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from dataclasses import dataclass

from sqlalchemy import select, update

from foureyes.core.errors import StoreError
from foureyes.store._clock import require_utc
from foureyes.store._database import Database
from foureyes.store.tables import alert_opt_ins, guardian_contacts

__all__ = ["Contact", "OptIn", "SqlConsentRecords", "new_record_id"]


def new_record_id() -> str:
    """A fresh random id for a consent, contact or alert record."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class OptIn:
    """A user's consent to guardian alerts."""

    id: str
    conversation_id: str
    opted_in_at: dt.datetime
    revoked_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class Contact:
    """A guardian's contact; alerts go only to verified, unrevoked ones."""

    id: str
    conversation_id: str
    address: str
    """Where the notifier delivers (a phone number, an address, a handle)."""
    locale: str
    """The language the guardian reads alerts in."""
    created_at: dt.datetime
    verified_at: dt.datetime | None
    revoked_at: dt.datetime | None


class SqlConsentRecords:
    """The ``alert_opt_ins`` and ``guardian_contacts`` tables."""

    def __init__(self, db: Database) -> None:
        """Use ``db``."""
        self._db = db

    # --- consent ------------------------------------------------------------------------

    async def opt_in(self, conversation_id: str, *, at: dt.datetime) -> OptIn:
        """Record the user's consent at ``at`` (a new record; earlier ones stay as history).

        Raises:
            StoreError: the write failed.
        """
        opt_in = OptIn(
            id=new_record_id(),
            conversation_id=conversation_id,
            opted_in_at=require_utc(at, "at"),
            revoked_at=None,
        )
        async with self._db.write("opt_in") as conn:
            await conn.execute(alert_opt_ins.insert().values(**dataclasses.asdict(opt_in)))
        return opt_in

    async def revoke_opt_in(self, conversation_id: str, *, at: dt.datetime) -> int:
        """Revoke every active consent of the conversation; returns how many were active.

        Raises:
            StoreError: the write failed.
        """
        async with self._db.write("revoke_opt_in") as conn:
            result = await conn.execute(
                update(alert_opt_ins)
                .where(
                    alert_opt_ins.c.conversation_id == conversation_id,
                    alert_opt_ins.c.revoked_at.is_(None),
                )
                .values(revoked_at=require_utc(at, "at"))
            )
        return int(result.rowcount)

    async def active_opt_in(self, conversation_id: str) -> OptIn | None:
        """The newest unrevoked consent, or ``None``.

        Raises:
            StoreError: the read failed.
        """
        async with self._db.read("active_opt_in") as conn:
            row = (
                await conn.execute(
                    select(alert_opt_ins)
                    .where(
                        alert_opt_ins.c.conversation_id == conversation_id,
                        alert_opt_ins.c.revoked_at.is_(None),
                    )
                    .order_by(alert_opt_ins.c.opted_in_at.desc())
                    .limit(1)
                )
            ).first()
        return None if row is None else OptIn(**row._mapping)

    # --- contacts -----------------------------------------------------------------------

    async def add_contact(
        self, conversation_id: str, address: str, *, locale: str, at: dt.datetime
    ) -> Contact:
        """Register a guardian contact, unverified.

        Raises:
            StoreError: the write failed.
        """
        contact = Contact(
            id=new_record_id(),
            conversation_id=conversation_id,
            address=address,
            locale=locale,
            created_at=require_utc(at, "at"),
            verified_at=None,
            revoked_at=None,
        )
        async with self._db.write("add_contact") as conn:
            await conn.execute(guardian_contacts.insert().values(**dataclasses.asdict(contact)))
        return contact

    async def verify_contact(self, contact_id: str, *, at: dt.datetime) -> None:
        """Mark a contact verified (after the out-of-band check succeeded).

        Raises:
            StoreError: the contact is unknown or revoked, or the write failed.
        """
        await self._stamp_contact("verify_contact", contact_id, "verified_at", at)

    async def revoke_contact(self, contact_id: str, *, at: dt.datetime) -> None:
        """Revoke a contact; it is never alerted again.

        Raises:
            StoreError: the contact is unknown or already revoked, or the write failed.
        """
        await self._stamp_contact("revoke_contact", contact_id, "revoked_at", at)

    async def _stamp_contact(
        self, operation: str, contact_id: str, column: str, at: dt.datetime
    ) -> None:
        async with self._db.write(operation) as conn:
            result = await conn.execute(
                update(guardian_contacts)
                .where(
                    guardian_contacts.c.id == contact_id,
                    guardian_contacts.c.revoked_at.is_(None),
                )
                .values({column: require_utc(at, "at")})
            )
            if result.rowcount != 1:
                raise StoreError(operation, f"contact {contact_id!r} is unknown or revoked")

    async def verified_contact(self, conversation_id: str) -> Contact | None:
        """The most recently verified, unrevoked contact of the conversation, or ``None``.

        Raises:
            StoreError: the read failed.
        """
        async with self._db.read("verified_contact") as conn:
            row = (
                await conn.execute(
                    select(guardian_contacts)
                    .where(
                        guardian_contacts.c.conversation_id == conversation_id,
                        guardian_contacts.c.verified_at.is_not(None),
                        guardian_contacts.c.revoked_at.is_(None),
                    )
                    .order_by(guardian_contacts.c.verified_at.desc())
                    .limit(1)
                )
            ).first()
        return None if row is None else Contact(**row._mapping)
