"""Configs and keys shared by the server tests."""

from __future__ import annotations

import os
from typing import Any

from foureyes.config import Config, ServerConfig, StoreConfig

CLIENT_KEY = "client-key-" + "c" * 24
ADMIN_KEY = "admin-key-" + "a" * 24
KEYS_ENV = {"CLIENT_KEYS": CLIENT_KEY, "ADMIN_KEYS": ADMIN_KEY}
"""The environment of a keyed service: one client and one admin key."""


def config(**server: Any) -> Config:
    """The default config with these ``[server]`` values, on the test's SQLite store."""
    store = StoreConfig(url=os.environ["FOUREYES_STORE__URL"])
    return Config(store=store, server=ServerConfig(**server))


def keyed(**server: Any) -> Config:
    """A config whose keys come from :data:`KEYS_ENV`."""
    return config(api_keys_env="CLIENT_KEYS", admin_keys_env="ADMIN_KEYS", **server)


def bearer(key: str) -> dict[str, str]:
    """The ``Authorization`` header sending ``key``."""
    return {"authorization": f"Bearer {key}"}
