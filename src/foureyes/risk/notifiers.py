"""Alert delivery: the notifier contract, a webhook notifier and a file notifier.

A notifier delivers one message and reports the outcome as data: ``delivered`` or not,
with a short detail. Expected failures (an unreachable endpoint, an HTTP error, a full
disk) are outcomes, not exceptions, so the alert service can record each try and retry
a bounded number of times.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from foureyes.config import AlertConfig
from foureyes.core.errors import ConfigError
from foureyes.core.locale import Locale

__all__ = [
    "AlertMessage",
    "Delivery",
    "FileNotifier",
    "Notifier",
    "WebhookNotifier",
    "build_notifier",
]

_MAX_DETAIL = 300


@dataclass(frozen=True, slots=True)
class AlertMessage:
    """One alert as handed to a notifier: a template text and where it goes, nothing else."""

    alert_id: str
    """The recorded attempt's id (lets a receiver drop a retried duplicate)."""
    address: str
    """The guardian contact's address."""
    locale: Locale
    """The language of ``text``."""
    text: str
    """One of the fixed alert templates."""

    def payload(self) -> dict[str, Any]:
        """The JSON document a notifier delivers."""
        return {
            "type": "foureyes.guardian_alert",
            "alert_id": self.alert_id,
            "to": self.address,
            "locale": self.locale.value,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class Delivery:
    """The outcome of one delivery try."""

    delivered: bool
    """Whether the receiver accepted the message."""
    detail: str = ""
    """What went wrong (or the receiver's status), without secrets."""


class Notifier(Protocol):
    """Delivers alert messages. Any object with this async method and a ``kind`` will do."""

    kind: str
    """Short name recorded with each attempt (``webhook``, ``file``, ...)."""

    async def send(self, message: AlertMessage) -> Delivery:
        """Deliver ``message`` once; failures are returned, not raised."""
        ...


class WebhookNotifier:
    """POSTs each alert as JSON to a URL; any 2xx answer counts as delivered."""

    kind = "webhook"

    def __init__(self, url: str, *, timeout_s: float) -> None:
        """Deliver to ``url``, giving each try ``timeout_s`` seconds."""
        self.url = url
        self.timeout_s = timeout_s

    async def send(self, message: AlertMessage) -> Delivery:
        """POST the message's payload once."""
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(self.url, json=message.payload()) as response,
            ):
                if 200 <= response.status < 300:
                    return Delivery(True, f"HTTP {response.status}")
                return Delivery(False, f"HTTP {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Delivery(False, f"{type(exc).__name__}: {exc}"[:_MAX_DETAIL])

    def __repr__(self) -> str:
        return f"WebhookNotifier(timeout_s={self.timeout_s!r})"


class FileNotifier:
    """Appends each alert as one JSON line to a file: for local use and tests."""

    kind = "file"

    def __init__(self, path: Path) -> None:
        """Append to ``path`` (created with its parent directories when missing)."""
        self.path = path

    async def send(self, message: AlertMessage) -> Delivery:
        """Append the message's payload as one line."""
        line = json.dumps(message.payload(), ensure_ascii=False, sort_keys=True) + "\n"
        try:
            await asyncio.to_thread(self._append, line)
        except OSError as exc:
            return Delivery(False, f"{type(exc).__name__}: {exc}"[:_MAX_DETAIL])
        return Delivery(True, "appended")

    def _append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(line)

    def __repr__(self) -> str:
        return f"FileNotifier(path={str(self.path)!r})"


def build_notifier(config: AlertConfig) -> Notifier:
    """The notifier ``risk.alert`` configures.

    Raises:
        ConfigError: no ``risk.alert.target`` is set.
    """
    if not config.target:
        raise ConfigError(["risk.alert.target is not set, so alerts cannot be delivered"])
    if config.notifier == "webhook":
        return WebhookNotifier(config.target, timeout_s=config.timeout_s)
    return FileNotifier(Path(config.target))
