"""Configuration: ``foureyes.toml``, environment overrides, strict validation.

Where it comes from, lowest priority first:

1. built-in defaults (every role on the ``offline`` route, SQLite store in the working dir);
2. the TOML file named by ``--config`` or ``FOUREYES_CONFIG``;
3. environment variables ``FOUREYES_<SECTION>__<KEY>``, e.g. ``FOUREYES_STORE__URL`` or
   ``FOUREYES_ROUTES__FLASH__MODEL``.

``FOUREYES_DATA_DIR`` (where the third-party data is, :mod:`foureyes.core.datadir`) is not
a config variable and is left alone.

Unknown keys are errors that name the key. Secrets never appear here: a route names the
environment variable holding its key (``api_key_env``) and the key is read only when the
route is built.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from foureyes.core.datadir import DATA_DIR_ENV
from foureyes.core.errors import ConfigError
from foureyes.core.fold import TOOL_NAME
from foureyes.core.locale import Locale
from foureyes.core.roles import CRISIS_ROLES, Role
from foureyes.core.validation import explain_errors

__all__ = [
    "AlertConfig",
    "CONFIG_ENV",
    "ColumnMap",
    "Config",
    "DEFAULT_MUTATING_TOOLS",
    "EvidenceConfig",
    "GateConfig",
    "InputConfig",
    "InputPatternConfig",
    "OFFLINE_ROUTE",
    "PrivacyConfig",
    "ReviewConfig",
    "RiskConfig",
    "RolesConfig",
    "RouteConfig",
    "ServerConfig",
    "StoreConfig",
    "load_config",
    "mask_url",
    "read_text_file",
    "validation_problems",
]

CONFIG_ENV = "FOUREYES_CONFIG"
"""Environment variable naming the config file when ``--config`` is not given."""
OFFLINE_ROUTE = "offline"
"""Name of the built-in offline route, always present unless the config redefines it."""
DEFAULT_STORE_URL = "sqlite+aiosqlite:///foureyes.db"


_ENV_PREFIX = "FOUREYES_"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# The fields' docstrings are their documentation, read in the source. They are not copied
# into pydantic's field descriptions (``use_attribute_docstrings``): that reads and parses
# this module's source once per class, about half of the CPU of `import foureyes.config`,
# for descriptions nothing reads (benchmarks/README.md, "Starting the command line").
class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def mask_url(url: str) -> str:
    """Replace a password in a URL's userinfo with ``***``."""
    return re.sub(r"(//[^/:@]*:)[^@/]*@", r"\1***@", url)


_ASYNC_DRIVERS = ("sqlite+aiosqlite://", "postgresql+asyncpg://")


def _check_driver(key: str, url: str) -> None:
    if not url.startswith(_ASYNC_DRIVERS):
        raise ValueError(
            f"{key} must start with sqlite+aiosqlite:// or postgresql+asyncpg:// "
            f"(got {mask_url(url)!r})"
        )


class StoreConfig(_Section):
    """``[store]``: where traces, ledgers and facts are kept."""

    url: str = DEFAULT_STORE_URL
    """SQLAlchemy async URL: ``sqlite+aiosqlite:///path.db`` or ``postgresql+asyncpg://...``."""
    timeout_s: float = Field(default=5.0, gt=0, le=600)
    """How long a store operation waits for a locked or unreachable database."""
    pool_size: int = Field(default=20, ge=1, le=1000)
    """PostgreSQL: connections each process keeps open (and the most it opens); a request
    that finds them all busy waits up to ``timeout_s`` for one, then fails as a store
    error. ``foureyes serve`` refuses to start when ``workers x pool_size`` exceeds what
    the server lets its role open (``max_connections`` less reserved slots, the role's
    and the database's limits); keep the sum over every instance under it too. Ignored
    on SQLite."""
    group_commit: bool = True
    """Concurrent replies' records share one transaction and one commit, each reply still
    leaving only after its record is durable (docs/architecture.md, "Store"); ``false``
    gives every write a transaction of its own (one commit and log sync per write)."""

    @model_validator(mode="after")
    def _known_driver(self) -> StoreConfig:
        _check_driver("store.url", self.url)
        return self


class RouteConfig(_Section):
    """``[routes.NAME]``: one model endpoint and its limits."""

    kind: str = Field(default="openai", pattern=r"^[a-z][a-z0-9_-]*$")
    """Provider kind: ``openai`` (any OpenAI-compatible API), ``offline`` (built-in engine),
    or a kind an installed plugin registers (``foureyes.route_kinds``, docs/plugins.md)."""
    base_url: str | None = None
    """Endpoint base URL, e.g. ``https://api.deepseek.com/v1``; required for ``openai``."""
    model: str = "foureyes-offline"
    """Model name sent to the endpoint."""
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME.pattern)
    """Name of the environment variable holding the API key (never the key itself)."""
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Per-call timeout in seconds; a run's deadline may shorten it."""
    max_tokens: int = Field(default=600, ge=1, le=200_000)
    """Completion token cap per call."""
    temperature: float = Field(default=0.3, ge=0, le=2)
    """Sampling temperature."""
    daily_calls: int | None = Field(default=None, ge=0)
    """Calls allowed per UTC day on this route; unset for no limit."""
    daily_budget_usd: float | None = Field(default=None, ge=0)
    """Spend allowed per UTC day in USD; needs ``price_in`` and ``price_out``."""
    price_in: float | None = Field(default=None, ge=0)
    """USD per million prompt tokens."""
    price_out: float | None = Field(default=None, ge=0)
    """USD per million completion tokens."""
    images: bool | None = None
    """Whether the route's model accepts image inputs: ``true``, ``false`` (text only), or
    unset when unknown. A masked review whose projection holds images is skipped unless
    the reviewer's route says ``true``."""
    max_request_tokens: int | None = Field(default=None, ge=1)
    """Largest masked-review request sent to this route, in estimated prompt tokens of the
    whole request (system prompt, tools, native prefix, snapshot and instruction); a review
    over it is skipped before any call (``over_tokens``, with the estimate and this budget
    in its metadata), never truncated. Unset: no token budget (``review.max_snapshot_chars``
    still bounds the snapshot)."""
    bytes_per_token: float = Field(default=1.0, gt=0, le=16)
    """The request token estimator: UTF-8 bytes of the request's canonical JSON (the units
    :func:`foureyes.review.request.request_units` measures) divided by this, rounded up.
    The default 1.0 does not underestimate text for a byte-level BPE tokenizer, in which
    every token stands for at least one byte; raise it only from a measured ratio for the
    route's model. Images count only by the bytes of their reference."""
    transport: Literal["aiohttp", "httpx", "lean"] = "lean"
    """How an ``openai`` route talks HTTP: ``lean`` (the default), foureyes' own minimal
    client over aiohttp, without the SDK: the same requests, streams, validation and
    errors, for about a third of the CPU per call (benchmarks/README.md); ``aiohttp`` or
    ``httpx``, the official ``openai`` SDK over that library (aiohttp measured faster)."""

    @model_validator(mode="after")
    def _consistent(self) -> RouteConfig:
        if self.kind == "openai" and not self.base_url:
            raise ValueError("base_url is required for kind 'openai'")
        if self.daily_budget_usd is not None and (self.price_in is None or self.price_out is None):
            raise ValueError("daily_budget_usd needs price_in and price_out")
        return self

    def __repr__(self) -> str:
        url = mask_url(self.base_url) if self.base_url else None
        return f"RouteConfig(kind={self.kind!r}, base_url={url!r}, model={self.model!r})"


class RolesConfig(_Section):
    """``[roles]``: which route serves each role."""

    counselor: str = OFFLINE_ROUTE
    """Route of the Counselor (drafts replies)."""
    supervisor: str = OFFLINE_ROUTE
    """Route of the Supervisor (reviews drafts)."""
    risk_l1: str = OFFLINE_ROUTE
    """Route of the L1 risk assessment."""
    risk_l2: str = OFFLINE_ROUTE
    """Route of the L2 independent risk review."""
    reviewer: str = OFFLINE_ROUTE
    """Route of the masked session reviewer."""
    selector: str = OFFLINE_ROUTE
    """Route of the evidence selector."""
    primary: str = OFFLINE_ROUTE
    """Route of the agent evaluated by ``foureyes eval`` agent suites (the agent loop)."""
    input_checker: str = OFFLINE_ROUTE
    """Route of the model input check (``[input] model_check``); the offline engine
    cannot judge inputs, so the check needs a model route."""

    def route_for(self, role: Role) -> str:
        """The route name configured for ``role``."""
        return str(getattr(self, role.value))


class GateConfig(_Section):
    """``[gate]``: the release gate."""

    max_revisions: int = Field(default=1, ge=0, le=5)
    """How many times the Counselor may revise after a rejection."""
    deadline_s: float = Field(default=30.0, gt=0, le=600)
    """Deadline for a whole draft-review-decide run."""
    max_calls: int = Field(default=6, ge=1, le=50)
    """Model calls one run may make."""
    locale: Literal["auto"] | Locale = "auto"
    """Language of fallback replies; ``auto`` follows the user's message."""
    history_turns: int = Field(default=4, ge=0, le=50)
    """Earlier turns the Supervisor sees besides the current message (minimisation)."""
    counselor_turns: int = Field(default=12, ge=0, le=200)
    """Earlier turns the Counselor sees when drafting."""
    max_chars: int = Field(default=1200, ge=1, le=20_000)
    """Longest candidate reply, in characters; a longer one breaks rule ``too_long``."""
    verdict_retries: int = Field(default=1, ge=0, le=2)
    """Retries of a verdict that breaks its contract (each costs a call)."""
    max_open_unknowns: int = Field(default=10, ge=0, le=50)
    """Open unknowns of a conversation passed into a review, most recent first."""
    region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    """ISO 3166-1 alpha-2 region of the users (``CN``, ``HK``, ...) when a request names
    none: it picks the crisis resources shown and the numbers a reply may contain; unset:
    resources follow the reply's language and any registry number is accepted."""
    resources_max_age_days: int = Field(default=365, ge=1, le=3650)
    """Registry entries verified longer ago than this are reported as stale."""
    extra_rules: dict[str, dict[Locale, str]] = Field(default_factory=dict)
    """Rules added to the built-in catalogue: id (``[a-z][a-z0-9_]*``) to a description in
    every locale. The Supervisor may cite them; add ``rule_patterns`` to check them in code."""
    rule_patterns: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Regular expressions per extra rule id; a candidate matching one breaks the rule."""
    speculative_draft: bool = True
    """Start the Counselor's first draft before triage finishes when the keyword gate (L0)
    did not escalate the message; an escalated message is drafted only once triage has set
    its policy. A draft written before a prohibition is discarded unread; off: draft only
    after triage."""
    tools_allow: tuple[str, ...] = ()
    """Tool (function) names a candidate may call; empty: any tool not in ``tools_deny``.
    A call outside a non-empty list falls back (``tool_not_allowed``) before any review."""
    tools_deny: tuple[str, ...] = ()
    """Tool names a candidate may never call (even when ``tools_allow`` names them); a
    call to one falls back (``tool_not_allowed``) before any review."""
    tools_when_restricted: tuple[str, ...] = ()
    """Tool names a candidate may still call while the message's policy is
    ``restricted`` (an escalated, unconfirmed message, or a conversation in crisis);
    empty, the default: none, a draft that calls any tool then falls back
    (``tool_not_allowed``). The lists compare names folded (case, ``_``/``-``, width)."""
    supervisor_unreviewed: bool = False
    """No second model reviews these replies. ``true`` lets ``serve`` start with a model
    Counselor and the offline (rules-only) Supervisor; without it ``config check`` and
    ``serve`` refuse that config, naming the unmapped role. The offline Supervisor still
    approves only the offline Counselor's own templates, so every draft of the model
    falls back (``insufficient``)."""
    release: Literal["whole", "segments"] = "whole"
    """``whole``: a reply goes out once all of it is reviewed. ``segments``: the Counselor's
    reply is cut into segments (sentence ends ``. ! ? 。！？`` and newlines, or
    ``segment_max_chars``), each reviewed, bound to the digest of the text released so far
    plus the segment, and streamed as it is approved; a reject or failure mid-way ends the
    stream with the fallback continuation (:mod:`foureyes.gate.segments`). A restricted or
    prohibited policy, a given draft and the team's own model are released whole."""
    segment_max_chars: int = Field(default=400, ge=20, le=20_000)
    """Longest segment in ``segments`` release, in characters, when no sentence end comes first."""
    texts_file: Path | None = None
    """A TOML file of the team's own fallback wording, by mode (``support``, ``guard``),
    reason class (a family such as ``held_back``, or one reason code such as
    ``budget_exhausted``) and locale (every one of ``en``, ``zh-Hans``, ``zh-Hant`` for
    each entry given); what it does not name keeps the built-in text. Loaded and checked
    at start-up and by ``config check``: an unknown key, a missing locale, an empty text
    or a text that a rule checked in code refuses (as it would refuse a draft) is a
    configuration error. The crisis reply's code-rendered resources follow its wording
    whatever it says (docs/gateway.md, "Fallback wording")."""

    @model_validator(mode="after")
    def _rules_complete(self) -> GateConfig:
        problems = []
        for rule, descriptions in self.extra_rules.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", rule):
                problems.append(f"gate.extra_rules: {rule!r} is not a rule id ([a-z][a-z0-9_]*)")
            missing = [loc.value for loc in Locale if not descriptions.get(loc, "").strip()]
            if missing:
                problems.append(f"gate.extra_rules.{rule} lacks {', '.join(missing)}")
        for rule, patterns in self.rule_patterns.items():
            if rule not in self.extra_rules:
                problems.append(f"gate.rule_patterns.{rule} names no rule in gate.extra_rules")
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    problems.append(f"gate.rule_patterns.{rule}: {pattern!r} is invalid: {exc}")
        for field in ("tools_allow", "tools_deny", "tools_when_restricted"):
            for name in getattr(self, field):
                if not TOOL_NAME.fullmatch(name):
                    problems.append(
                        f"gate.{field}: {name!r} is not a tool name (1 to 64 of A-Z a-z 0-9 _ -)"
                    )
        if problems:
            raise ValueError("; ".join(problems))
        return self


class AlertConfig(_Section):
    """``[risk.alert]``: the guardian alert, off unless a deployment turns it on.

    An alert is only ever sent after double confirmation and every other precondition
    (docs/design.md 4, invariant 5); these settings can narrow that path, never widen it.
    """

    enabled: bool = False
    """Whether this deployment may send guardian alerts at all."""
    cooldown_h: float = Field(default=24.0, gt=0, le=24 * 30)
    """Hours after an alert to a contact during which no other alert goes to that contact."""
    daily_cap: int = Field(default=20, ge=0, le=100_000)
    """Live alerts the whole deployment may attempt per UTC day (0: none)."""
    max_send_attempts: int = Field(default=3, ge=1, le=10)
    """Tries per alert before it is recorded as failed (first try included)."""
    retry_backoff_s: float = Field(default=2.0, ge=0, le=60)
    """Seconds to wait before each retry of a failed send."""
    notifier: Literal["file", "webhook"] = "file"
    """Delivery: ``file`` appends JSON lines to ``target`` (local use), ``webhook`` POSTs
    JSON to the URL in ``target``."""
    target: str | None = None
    """The JSONL file of the ``file`` notifier, or the http(s) URL of the ``webhook``."""
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    """How long one webhook delivery may take."""

    @model_validator(mode="after")
    def _deliverable(self) -> AlertConfig:
        if self.enabled and not self.target:
            raise ValueError("risk.alert.target is required when alerts are enabled")
        if (
            self.notifier == "webhook"
            and self.target is not None
            and not self.target.startswith(("http://", "https://"))
        ):
            raise ValueError("risk.alert.target of a webhook must be an http:// or https:// URL")
        return self

    def __repr__(self) -> str:
        target = mask_url(self.target) if self.target else None
        return (
            f"AlertConfig(enabled={self.enabled!r}, notifier={self.notifier!r}, target={target!r})"
        )


class RiskConfig(_Section):
    """``[risk]``: crisis triage."""

    confirm_confidence: float = Field(default=0.85, gt=0.5, le=1)
    """Both L1 and L2 must reach this confidence to confirm a crisis. Above 0.5, so the
    offline assessor (whose confidence never exceeds 0.5) can never confirm."""
    l1_daily_limit: int = Field(default=300, ge=0, le=100_000)
    """L1 assessments allowed per conversation per UTC day (kept in the spend ledger).
    Under ``l1_policy = "every"`` each user message takes one: 300 is a message every three
    minutes for fifteen hours. Past it a message L0 clears is ``l0_only``; one L0
    escalates (or one of a conversation in crisis) is ``unknown``, ``daily_cap``."""
    l1_daily_limit_per_key: int = Field(default=30_000, ge=0, le=10_000_000)
    """L1 assessments allowed per API key per UTC day, over all its conversations (new
    and rotated ids included); callers without a key share the ``local`` namespace and
    its allowance. Past it a triage is ``unknown`` with reason ``key_daily_cap``."""
    context_turns: int = Field(default=10, ge=0, le=100)
    """Earlier turns L2 sees; under ``l1_policy = "screened"`` also the user turns whose
    L0 scores add up with the current message's."""
    l1_policy: Literal["every", "escalated", "always", "screened"] = "every"
    """When L1 assesses a message. ``every`` (the default): every user message when
    ``roles.risk_l1`` names a model route, concurrently with the speculative draft, and as
    ``escalated`` when it is the offline route (L0 is then the whole screen).
    ``escalated``: when L0 escalates. ``always``: every
    message (no speculative draft then; with the offline route as ``risk_l1`` this costs
    microseconds). ``screened``: when L0 escalates, or L0's scores of the current message
    and of the last ``context_turns`` user turns of the request's history add up to L0's
    escalation threshold. Under every policy a message in a language the screen does not
    cover goes to L1 and is ``unscreened`` unless a model assessed it."""
    crisis_hold_hours: float = Field(default=24.0, gt=0, le=24 * 90)
    """How long a conversation stays in crisis after its last escalated turn (L0
    escalated it, or a model said high or critical, or it was confirmed), unless a model
    that read the conversation says ``low`` with no context flag first. In crisis, every
    message goes to L1 and no reply is less than ``restricted``."""
    trend_days: int = Field(default=7, ge=1, le=90)
    """Days of assessment history L2's trend covers."""
    deadline_s: float = Field(default=20.0, gt=0, le=600)
    """Deadline for one triage, L1 and L2 together."""
    max_calls: int = Field(default=4, ge=1, le=20)
    """Model calls one triage may make (L1 and L2, one retry each by default)."""
    max_text_chars: int = Field(default=8000, ge=1, le=1_000_000)
    """Longest text shown to L1 and L2; a longer one is never cut, its triage is
    ``unknown`` with reason ``text_too_long`` (L0 still scans all of it)."""
    reserved_share: float = Field(default=0.2, ge=0, le=0.9)
    """Share of a route's ``daily_calls`` and ``daily_budget_usd`` kept for the crisis
    roles (``risk_l1``, ``risk_l2``) when the route also serves other roles: those may use
    at most ``1 - reserved_share`` of it (calls rounded down), kept in the spend ledger as
    ``route:NAME:non_crisis``, so chat traffic can never spend L1's room. 0 turns it off;
    a route only the crisis roles use is not split."""

    resources_file: Path | None = None
    """A crisis-resource registry file (the schema of the packaged
    ``risk/data/resources.json``; every entry with its ``source`` and ``checked`` date).
    Loaded and validated at start-up and by ``config check``; unset: the packaged one."""
    resources_mode: Literal["extend", "replace"] = "extend"
    """``extend``: the file's regions and entries are added to the packaged ones (an
    entry with a packaged id replaces it); ``replace``: the file is the whole registry."""
    alert: AlertConfig = AlertConfig()
    """Guardian alert."""


DEFAULT_MUTATING_TOOLS: tuple[str, ...] = (
    "apply_patch",
    "bash",
    "create",
    "edit",
    "edit_file",
    "execute_bash",
    "execute_command",
    "insert",
    "python",
    "rm",
    "run",
    "run_command",
    "shell",
    "str_replace_based_edit_tool",
    "str_replace_editor",
    "write",
    "write_file",
)
"""Tool names ``since-last-mutation`` treats as changing state, by default
(``review.mutating_tools``): edit, write and patch tools, and shell or run commands, which
may change anything. Compared case-folded with the name of each call; the arguments are
not read, so a call of a mutating tool that only reads still counts."""


class ReviewConfig(_Section):
    """``[review]``: masked review of agent sessions."""

    max_snapshot_chars: int = Field(default=65536, ge=1)
    """Projections larger than this are skipped, never truncated."""
    max_images: int = Field(default=20, ge=0)
    """Projections with more images than this are skipped."""
    packet_max_chars: int = Field(default=10000, ge=1)
    """Largest serialised review packet accepted."""
    publish: Literal["updates-only", "all", "observe-only"] = "updates-only"
    """Which accepted packets are published."""
    mutating_tools: tuple[Annotated[str, Field(min_length=1)], ...] = Field(
        default=DEFAULT_MUTATING_TOOLS, min_length=1
    )
    """Tool names the ``since-last-mutation`` window treats as changing state (compared
    case-folded with each call's name; arguments are not read). The default lists edit,
    write and patch tools and shell or run commands: :data:`DEFAULT_MUTATING_TOOLS`."""


class PrivacyConfig(_Section):
    """``[privacy]``: what of the user's text is kept."""

    store_raw_text: bool = False
    """Keep raw user text in traces; otherwise only an HMAC of it. Model-written text
    that may restate the user's words (a verdict's notes and missing items, open
    unknowns as traces and the unknowns API show them) follows the same setting. The
    one exception: an open unknown's words stay sealed for the next prompts whatever
    this says (``unknowns_key_env``, ``unknown_retention_days``)."""
    retention_days: int = Field(default=30, ge=1, le=3650)
    """How long raw text (and that model-written text) is kept when it is kept at all;
    past it the text reads as absent, and the purge erases it."""
    purge_interval_s: float = Field(default=3600.0, ge=0, le=7 * 86400)
    """Seconds between purges of expired text while ``foureyes serve`` runs (the first
    one at start-up); 0 disables the schedule (``foureyes store purge`` still purges).
    Several instances on one PostgreSQL may all purge: they skip each other's rows."""
    hmac_key_env: str | None = Field(default=None, pattern=_ENV_NAME.pattern)
    """Variable holding the HMAC key; unset: a random key kept in the store is used."""
    unknowns_key_env: str | None = Field(default=None, pattern=_ENV_NAME.pattern)
    """Variable holding the key that seals open unknowns' words at rest (AES-256-GCM):
    32 bytes as 64 hex characters or URL-safe base64. Unset: a random key kept in the
    store is used, which protects a copied unknowns table but not a copied store."""
    unknown_retention_days: int = Field(default=30, ge=1, le=3650)
    """How long an open unknown keeps its sealed words after it was last raised; they are
    erased sooner when it is resolved. Past it the prompts say its wording is not kept,
    and the purge erases them (the unknown stays open by its HMAC)."""

    def unknowns_key(self, environ: Mapping[str, str]) -> bytes | None:
        """The 32-byte key ``unknowns_key_env`` names in ``environ``; ``None`` when unset.

        Raises:
            ConfigError: the variable is named but not set, or does not hold 32 bytes as
                64 hex characters or URL-safe base64 (naming the variable, never its value).
        """
        name = self.unknowns_key_env
        if name is None:
            return None
        value = environ.get(name, "").strip()
        if not value:
            # Falling back to the stored key would leave every sealed word unopenable.
            raise ConfigError([f"environment variable {name} is not set"])
        key, held = _key_bytes(value)
        if key is None:
            raise ConfigError(
                [
                    f"environment variable {name} must hold a {_UNKNOWNS_KEY_BYTES}-byte key "
                    f"as 64 hex characters or URL-safe base64 (it holds {held})"
                ]
            )
        return key


_UNKNOWNS_KEY_BYTES = 32
_HEX = re.compile(r"[0-9A-Fa-f]+")


def _key_bytes(value: str) -> tuple[bytes | None, str]:
    """``value`` as a 32-byte key (hex or URL-safe base64), or ``None`` and what it holds.

    What it holds is said by its length and decoded size, never by its characters.
    """
    if _HEX.fullmatch(value) and len(value) % 2 == 0:
        if len(value) == 2 * _UNKNOWNS_KEY_BYTES:
            return bytes.fromhex(value), ""
        return None, f"{len(value)} hex characters"
    try:
        padded = value + "=" * (-len(value) % 4)
        key = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        count = f"{len(value)} character" + ("" if len(value) == 1 else "s")
        return None, f"{count}, neither hex nor URL-safe base64"
    if len(key) != _UNKNOWNS_KEY_BYTES:
        return None, f"{len(value)} characters of base64, {len(key)} bytes"
    return key, ""


_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"


class ColumnMap(_Section):
    """Which column of the application's table holds each field of a record.

    ``[evidence.columns]`` in the config; also built in Python for
    :class:`foureyes.evidence.SqlCatalogSource`.
    """

    snapshot_id: str = Field(default="snapshot_id", pattern=_IDENTIFIER)
    """Column naming the snapshot a row belongs to; a catalog is the rows of one value."""
    ref: str = Field(default="ref", pattern=_IDENTIFIER)
    """Column holding the record's ref (unique within a snapshot)."""
    kind: str = Field(default="kind", pattern=_IDENTIFIER)
    """Column holding the source kind (``lifestyle.exercise``)."""
    value: str = Field(default="value", pattern=_IDENTIFIER)
    """Column holding the value."""
    source: str = Field(default="source", pattern=_IDENTIFIER)
    """Column holding where the record came from."""
    admissible: str = Field(default="admissible", pattern=_IDENTIFIER)
    """Boolean column (or integer 0/1) saying whether the record may be cited."""
    observed_at: str = Field(default="observed_at", pattern=_IDENTIFIER)
    """Column holding the observation time: a timestamp, a date or ISO 8601 text."""
    subject: str | None = Field(default=None, pattern=_IDENTIFIER)
    """Column naming whom a row is about; every row of a snapshot must name the same one,
    the subject the durable owner files its observations under. Unset: the catalog names
    nobody, and the owner commits nothing from it (``subject_unbound``)."""
    json_value: bool = True
    """Whether ``value`` holds JSON (a JSON string or object): a ``json``/``jsonb`` column
    on PostgreSQL, a JSON text column on SQLite. ``False`` reads it as plain text."""


class EvidenceConfig(_Section):
    """``[evidence]``: the server's own authority for evidence-bound facts.

    ``POST /v1/facts/select`` names only a snapshot: the durable owner rebuilds that
    snapshot from the catalog source configured here and judges it with the kinds file
    configured here, never with anything the request carries. Unset: the server has no
    facts to select (the endpoint answers 404); ``foureyes facts select`` still works on
    local files.
    """

    kinds_file: str | None = None
    """TOML file of the observation kinds (docs/evidence.md); read at start-up, and a
    kind whose template has no ``{slot}`` is a config error naming the kind."""
    catalog_file: str | None = None
    """JSON catalog file (one snapshot, the pinned form), read afresh at every commit."""
    catalog_url: str | None = None
    """SQLAlchemy async URL of the application's database holding the records
    (``sqlite+aiosqlite:///app.db``, ``postgresql+asyncpg://...``); with ``catalog_table``."""
    catalog_table: str | None = Field(default=None, pattern=_IDENTIFIER)
    """Table of the records in ``catalog_url``'s database."""
    catalog_schema: str | None = Field(default=None, pattern=_IDENTIFIER)
    """Schema of ``catalog_table`` (PostgreSQL); unset: the default schema."""
    columns: ColumnMap = ColumnMap()
    """Which column of ``catalog_table`` holds each field of a record."""
    owner_url: str | None = None
    """SQLAlchemy async URL of the store's database as the durable owner's own role
    (``postgresql+asyncpg://foureyes_owner@db/foureyes``, after ``foureyes store
    init-roles``): the owner writes observations through it, and ``store.url``'s role may
    only read them. Unset: the owner writes through the store's own connection. In a
    gateway's config that commits through ``owner_service_url``, leave it unset: the
    gateway then holds no credential that can write observations."""
    owner_service_url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+(/\S*)?$")
    """Base URL of the owner service (``foureyes owner serve``, docs/evidence.md): the
    gateway sends it the selections, and the service, the only holder of the owner's
    credential, rebuilds, renders and writes. Unset: the owner runs in this process."""
    owner_token_env: str | None = Field(default=None, pattern=_ENV_NAME.pattern)
    """Environment variable holding the bearer token of the owner service (the same name
    in the gateway's config and the service's); it lets a caller ask for a commit, never
    write a row. Required with ``owner_service_url`` and by ``foureyes owner serve``."""

    @model_validator(mode="after")
    def _one_source(self) -> EvidenceConfig:
        problems = []
        if self.owner_service_url is not None:
            if self.owner_url is not None:
                problems.append(
                    "evidence: owner_service_url and owner_url do not go together (the "
                    "owner service holds the owner's credential, not this process)"
                )
            if self.owner_token_env is None:
                problems.append("evidence.owner_service_url needs owner_token_env")
        if self.catalog_file is not None and self.catalog_url is not None:
            problems.append("evidence: set catalog_file or catalog_url, not both")
        if (self.catalog_url is None) != (self.catalog_table is None):
            problems.append("evidence.catalog_url and evidence.catalog_table go together")
        for key, url in (("catalog_url", self.catalog_url), ("owner_url", self.owner_url)):
            if url is None:
                continue
            try:
                _check_driver(f"evidence.{key}", url)
            except ValueError as exc:
                problems.append(str(exc))
        has_source = self.catalog_file is not None or self.catalog_url is not None
        if has_source != (self.kinds_file is not None):
            problems.append("evidence: a catalog source and kinds_file go together")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def configured(self) -> bool:
        """Whether a catalog source (and so a kinds file) is configured."""
        return self.kinds_file is not None

    def __repr__(self) -> str:
        url = mask_url(self.catalog_url) if self.catalog_url else None
        return (
            f"EvidenceConfig(kinds_file={self.kinds_file!r}, catalog_file={self.catalog_file!r}, "
            f"catalog_url={url!r}, catalog_table={self.catalog_table!r})"
        )


class InputPatternConfig(_Section):
    """``[input.patterns.NAME]``: one check of the team's own patterns; NAME is its id.

    Each pattern is matched on the text as written and on its keyword fold (case,
    invisible characters, width and spacing tricks undone), as the gate's
    ``rule_patterns`` are; every match is a finding of ``category``.
    """

    category: Literal["prompt_injection", "jailbreak", "pii", "unsafe_content", "off_topic"]
    """The category a match is a finding of (:class:`foureyes.inputs.InputCategory`)."""
    patterns: tuple[Annotated[str, Field(min_length=1, max_length=2000)], ...] = Field(
        min_length=1, max_length=200
    )
    """Python regular expressions. One that does not compile, or that matches the empty
    string (it would match at every position), is a configuration error."""
    detects: str = Field(default="", max_length=200)
    """What the patterns detect, for the catalogue line; empty: ``team patterns``."""
    languages: tuple[Annotated[str, Field(min_length=1, max_length=20)], ...] = Field(
        default=("*",), min_length=1
    )
    """The languages the patterns are written for (``en``, ``zh-Hans``, ``zh-Hant``);
    ``*``: any."""


InputAction = Literal["block", "restrict", "strip", "record"]
"""What the ``[input]`` stage does with a finding (docs/inputs.md, "The stage")."""
_CATEGORIES = ("prompt_injection", "jailbreak", "pii", "unsafe_content", "off_topic")


def _actions(**overrides: str) -> dict[Any, Any]:
    return {category: overrides.get(category, "record") for category in _CATEGORIES}


class InputConfig(_Section):
    """``[input]``: the input checks (:mod:`foureyes.inputs`, docs/inputs.md).

    The gateway and :class:`foureyes.Guard` run them on every message, on every ``source``
    and on every tool result before anything is drafted (the ``[input]`` stage), and code
    decides per category what happens: ``block`` (no model drafts; the fallback goes out
    with reason ``input_blocked``), ``restrict`` (the reply may carry no tool calls: a draft
    with tool calls falls back with ``input_restricted``), ``strip`` (a source or tool
    result only: its text is replaced by a marker in what every model sees) or ``record``
    (the trace keeps the finding). Crisis triage always runs first and is never blocked.
    """

    max_chars: int = Field(default=200_000, ge=1, le=5_000_000)
    """Longest text the checks judge, in characters; a longer one is not scanned at all
    and its scan says so (``refused = too_long``), so no caller can take it as clean."""
    encoded_depth: int = Field(default=3, ge=1, le=6)
    """How many nested encodings (base64 of hex of percent-encoding ...) the
    encoded-payload check decodes; text still encoded below that depth is a finding."""
    patterns: dict[str, InputPatternConfig] = Field(default_factory=dict)
    """The team's own pattern checks by id (``[a-z][a-z0-9_]*``, not a registered check's
    id)."""
    enabled: bool = True
    """Run the stage. ``false``: no input check runs and the trace says so."""
    message: dict[
        Literal["prompt_injection", "jailbreak", "pii", "unsafe_content", "off_topic"],
        Literal["block", "restrict", "record"],
    ] = Field(
        default_factory=lambda: _actions(
            prompt_injection="restrict", jailbreak="restrict", unsafe_content="block"
        )
    )
    """What a finding in the user's message does, per category (a category left out:
    ``record``). The heuristics flag a user who quotes an attack to ask about it exactly
    like the attack (docs/inputs.md), so the default restricts rather than blocks."""
    sources: dict[
        Literal["prompt_injection", "jailbreak", "pii", "unsafe_content", "off_topic"],
        InputAction,
    ] = Field(
        default_factory=lambda: _actions(
            prompt_injection="strip", jailbreak="strip", unsafe_content="strip"
        )
    )
    """What a finding in a ``source`` or a tool result does, per category (left out:
    ``record``). Material carrying instructions is data, never an instruction to a model."""
    on_failure: Literal["block", "restrict", "record"] = "restrict"
    """What a check that could not judge does (a text too long or without UTF-8 bytes, a
    check that raised, the model check's timeout, malformed answer, wrong digest, spent
    budget or route error): the reply is ``restrict`` ed by default, never silently taken
    as clean; ``block`` falls back with reason ``input_unchecked``."""
    pii: Literal["keep", "mask"] = "keep"
    """``mask``: personal data found in the message, the history, the sources and tool
    results is replaced by placeholders (``[PHONE_1]``) before any text reaches a model
    route, and the store keeps only the masked text. The delivered reply is the text the
    gate approved: a placeholder the model repeats stays a placeholder."""
    model_check: bool = False
    """Also ask the ``input_checker`` role's model (its own route and budget) for a verdict
    naming the SHA-256 of the exact text it judged; it runs beside triage and the draft."""
    topic: dict[Locale, Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=dict
    )
    """The team's topic policy for the model check's ``off_topic`` category, per locale
    ("only questions about our product"); empty: the checker reports no ``off_topic``."""
    history_turns: int = Field(default=6, ge=0, le=50)
    """Earlier turns the model check sees, so it may judge the conversation's arc."""
    flag_turns: int = Field(default=3, ge=0, le=50)
    """A conversation in which an injection or a jailbreak was restricted or blocked keeps
    a flag for this many more messages: they are restricted too (no tool call released),
    whatever their own checks find, as a crisis keeps its state. 0: no flag."""

    @model_validator(mode="before")
    @classmethod
    def _actions_over_defaults(cls, data: Any) -> Any:
        # A table that names one category keeps the defaults of the others.
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in ("message", "sources"):
            given = data.get(key)
            if isinstance(given, Mapping):
                default = cls.model_fields[key].get_default(call_default_factory=True)
                data[key] = {**default, **given}
        return data

    @model_validator(mode="after")
    def _patterns_compile(self) -> InputConfig:
        problems = []
        for name, check in self.patterns.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", name):
                problems.append(f"input.patterns: {name!r} is not a check id ([a-z][a-z0-9_]*)")
            for pattern in check.patterns:
                try:
                    compiled = re.compile(pattern)
                except re.error as exc:
                    problems.append(f"input.patterns.{name}: {pattern!r} is invalid: {exc}")
                    continue
                if compiled.fullmatch("") is not None:
                    problems.append(f"input.patterns.{name}: {pattern!r} matches the empty string")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class ServerConfig(_Section):
    """``[server]``: the HTTP service, its API keys and its request limits.

    API keys come from the two variables named here (read at start-up) and from
    ``foureyes keys create``; the store keeps only their SHA-256. While the store has never
    held a key, requests without one are accepted only when ``host`` is a loopback
    address, and only from this machine (see :mod:`foureyes.server.auth`).
    """

    mode: Literal["support", "guard"] = "support"
    """What ``/v1/chat/completions`` answers with. ``support``: foureyes' own Counselor
    drafts (the client's ``system``/``developer`` messages and ``tools`` are ignored).
    ``guard``: the client's request as it is (its system and developer messages, history,
    ``tools`` and ``tool_choice``) goes to the route the ``counselor`` role names (the
    team's own model), and that model's reply (text and tool calls) is the draft the
    gate judges, as ``POST /v1/check`` judges a caller's draft."""
    host: str = "127.0.0.1"
    """Interface to listen on."""
    port: int = Field(default=8000, ge=1, le=65535)
    """Port to listen on."""
    api_keys_env: str | None = Field(default=None, pattern=_ENV_NAME.pattern)
    """Variable holding comma-separated client API keys (scope ``client``), loaded at
    start-up; a key dropped from it stops working then. Unset: no client keys from env."""
    admin_keys_env: str | None = Field(default=None, pattern=_ENV_NAME.pattern)
    """Variable holding comma-separated admin API keys (scope ``admin``: traces, console,
    keys, metrics), loaded like ``api_keys_env``."""
    key_cache_s: float = Field(default=5.0, ge=0, le=300)
    """Seconds a verified key is trusted before the store is asked again: a key revoked
    with ``foureyes keys revoke`` stops working on running instances within this time."""
    workers: int = Field(default=1, ge=1, le=512)
    """Worker processes ``foureyes serve`` runs on the one port (``--workers``). The start-up
    checks and the store's migrations run once, in the parent, before any worker starts;
    a worker that fails to start stops them all. On SQLite allowed only while the file is
    in WAL mode (checked at start)."""
    rate_limit_backend: Literal["memory", "store"] | None = None
    """Where the per-key token buckets live. ``store``: rows in the store, one statement
    per lease of ``rate_lease_tokens``, so every process on the database shares each key's
    bucket (N workers or N instances behind a load balancer never allow more than
    ``rate_per_minute``); a store that cannot answer refuses the request (503).
    ``memory``: in this process, so N instances allow up to N times the rate. Unset:
    ``store`` when ``workers`` is above 1, else ``memory``; ``memory`` with more than one
    worker is refused."""
    rate_per_minute: float = Field(default=600.0, gt=0, le=10_000_000)
    """Requests per minute each key may sustain (without keys: each loopback client),
    across every process sharing the buckets (see ``rate_limit_backend``)."""
    burst: int = Field(default=60, ge=1, le=1_000_000)
    """Requests a key may send at once before ``rate_per_minute`` applies."""
    rate_lease_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    """With the ``store`` backend: tokens each process leases from a key's bucket in one
    statement and then admits requests from itself, so the key's row is written once per
    lease rather than once per request (no hot row for workers to queue on). Across every
    process the limit is never exceeded; each process may under-admit by at most one
    lease (tokens it leased and did not spend, which fade back as the bucket refills).
    ``1``: one statement per request, exact. At most ``burst``. Unset: a tenth of the
    burst, at most one second of ``rate_per_minute``, at least 1 (6 with the defaults)."""
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    """Largest request body accepted, in bytes; a larger one gets HTTP 413 before it is
    read (a declared Content-Length is checked first, streamed bytes are counted)."""
    body_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    """Seconds a request's whole body may take to arrive, from the end of its headers: a
    body still incomplete then is answered HTTP 408 and its connection closed, so a client
    that promises bytes and stalls cannot hold a connection open."""
    max_connections: int = Field(default=1000, ge=1, le=1_000_000)
    """Connections ``foureyes serve`` serves at once (uvicorn's ``limit_concurrency``); a
    request arriving on any connection beyond gets a plain-text HTTP 503. Each worker
    process counts its own."""
    log_queue_lines: int = Field(default=10_000, ge=1, le=1_000_000)
    """Log lines ``foureyes serve`` holds (per process) for the thread that writes them to
    stderr. A sink slower than the log (a full pipe, a stalled collector) drops the lines
    beyond, counted in ``foureyes_log_lines_dropped_total``; it never stalls requests."""
    cors_origins: tuple[str, ...] = ()
    """Browser origins allowed to call the API (``https://app.example``, or ``*`` for
    any); a comma-separated string in the environment. Empty: CORS is off."""

    @model_validator(mode="before")
    @classmethod
    def _split_origins(cls, data: Any) -> Any:
        # Environment overrides arrive as one string.
        if isinstance(data, dict) and isinstance(data.get("cors_origins"), str):
            origins = [o.strip() for o in data["cors_origins"].split(",") if o.strip()]
            data = {**data, "cors_origins": origins}
        return data

    @model_validator(mode="after")
    def _check_keys_and_origins(self) -> ServerConfig:
        problems = [
            f"server.cors_origins: {origin!r} is not '*' or scheme://host[:port] (no path)"
            for origin in self.cors_origins
            if origin != "*" and not re.fullmatch(r"https?://[^/\s]+", origin)
        ]
        if self.api_keys_env is not None and self.api_keys_env == self.admin_keys_env:
            problems.append("server.api_keys_env and server.admin_keys_env must differ")
        if self.rate_lease_tokens is not None and self.rate_lease_tokens > self.burst:
            problems.append(
                f"server.rate_lease_tokens = {self.rate_lease_tokens} is more than "
                f"server.burst = {self.burst}: a lease cannot hold more than the bucket"
            )
        if self.workers > 1 and self.rate_limit_backend == "memory":
            problems.append(
                f"server.rate_limit_backend = 'memory' with server.workers = {self.workers}: "
                f"each worker would allow the whole rate; use 'store'"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def shared_rate_limits(self) -> bool:
        """Whether the rate limits live in the store (``rate_limit_backend`` resolved)."""
        if self.rate_limit_backend is None:
            return self.workers > 1
        return self.rate_limit_backend == "store"

    @property
    def lease_tokens(self) -> int:
        """Tokens a process leases at once (``rate_lease_tokens``, or its default)."""
        if self.rate_lease_tokens is not None:
            return self.rate_lease_tokens
        return max(1, min(self.burst // 10, int(self.rate_per_minute // 60)))


def _default_routes() -> dict[str, RouteConfig]:
    return {OFFLINE_ROUTE: RouteConfig(kind="offline", model="foureyes-offline")}


class Config(BaseModel):
    """The whole effective configuration. Frozen: per-call changes use ``model_copy``."""

    # A plain model: load_config merges the file and the environment itself (so callers
    # and tests can pass an explicit mapping), which is all pydantic-settings did here;
    # importing it cost every command more CPU than the rest of the config. Defaults are
    # validated, as pydantic-settings' were.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    store: StoreConfig = StoreConfig()
    """Durable store."""
    routes: dict[str, RouteConfig] = Field(default_factory=_default_routes)
    """Model endpoints by name; ``offline`` is always present."""
    roles: RolesConfig = RolesConfig()
    """Role to route mapping."""
    gate: GateConfig = GateConfig()
    """Release gate."""
    risk: RiskConfig = RiskConfig()
    """Crisis triage."""
    review: ReviewConfig = ReviewConfig()
    """Masked review."""
    privacy: PrivacyConfig = PrivacyConfig()
    """Privacy of user text."""
    server: ServerConfig = ServerConfig()
    """HTTP service."""
    evidence: EvidenceConfig = EvidenceConfig()
    """The server's catalog source and kinds for evidence-bound facts."""
    input: InputConfig = InputConfig()
    """The input checks and the ``[input]`` stage before drafting."""

    @model_validator(mode="before")
    @classmethod
    def _add_offline_route(cls, data: Any) -> Any:
        # The built-in route exists even when a file lists only its own routes.
        if isinstance(data, dict) and isinstance(data.get("routes"), dict):
            data = {**data, "routes": {OFFLINE_ROUTE: {"kind": "offline"}, **data["routes"]}}
        return data

    @model_validator(mode="after")
    def _roles_name_routes(self) -> Config:
        missing = [
            f"roles.{role.value} names route {self.roles.route_for(role)!r}, "
            f"which is not defined (defined: {', '.join(sorted(self.routes))})"
            for role in Role
            if self.roles.route_for(role) not in self.routes
        ]
        if missing:
            raise ValueError("; ".join(missing))
        return self

    @model_validator(mode="after")
    def _input_checker_is_a_model(self) -> Config:
        if self.input.model_check and self.routes[self.roles.input_checker].kind == "offline":
            raise ValueError(
                f"input.model_check needs roles.input_checker on a model route; route "
                f"{self.roles.input_checker!r} is offline and cannot judge inputs"
            )
        return self

    def route_for(self, role: Role) -> tuple[str, RouteConfig]:
        """The route name and its config serving ``role``."""
        name = self.roles.route_for(role)
        return name, self.routes[name]

    def crisis_shared_routes(self) -> list[str]:
        """Routes serving a crisis role (``risk_l1``/``risk_l2``) and another role, sorted.

        On them the other roles get only ``1 - [risk] reserved_share`` of the daily limits.
        """
        crisis = {self.roles.route_for(r) for r in Role if r in CRISIS_ROLES}
        others = {self.roles.route_for(r) for r in Role if r not in CRISIS_ROLES}
        return sorted(crisis & others)

    def unreviewed_replies(self) -> str | None:
        """Why no second model reviews the Counselor's replies; ``None`` when one does.

        That is a Counselor on a model route with the Supervisor on an ``offline`` route:
        the offline Supervisor can judge only the offline Counselor's own templates.
        """
        counselor, counselor_route = self.route_for(Role.COUNSELOR)
        supervisor, supervisor_route = self.route_for(Role.SUPERVISOR)
        if counselor_route.kind == "offline" or supervisor_route.kind != "offline":
            return None
        return (
            f"roles.supervisor is not mapped to a model (route {supervisor!r} is offline, "
            f"rules only) while roles.counselor uses route {counselor!r} "
            f"(kind {counselor_route.kind!r}): no second model reviews these replies"
        )

    def review_problems(self) -> list[str]:
        """The unreviewed Counselor as a config problem, unless the config says it is meant.

        Empty when a second model reviews, or ``gate.supervisor_unreviewed`` is set.
        """
        unreviewed = self.unreviewed_replies()
        if unreviewed is None or self.gate.supervisor_unreviewed:
            return []
        return [
            f"{unreviewed}; map [roles] supervisor to a model route, or set [gate] "
            "supervisor_unreviewed = true (the model's drafts then all fall back as insufficient)"
        ]

    def require_review(self) -> None:
        """Check at start-up that a second model reviews a model Counselor's replies.

        Raises:
            ConfigError: :meth:`review_problems` found one, naming the unmapped role.
        """
        problems = self.review_problems()
        if problems:
            raise ConfigError(problems)

    def missing_secrets(self, environ: Mapping[str, str]) -> list[str]:
        """Names of API-key variables that routes in use need and ``environ`` lacks."""
        used = {self.roles.route_for(role) for role in Role}
        names = {
            r.api_key_env
            for name, r in self.routes.items()
            if name in used and r.api_key_env and not environ.get(r.api_key_env)
        }
        for optional in (
            self.privacy.hmac_key_env,
            self.server.api_keys_env,
            self.server.admin_keys_env,
        ):
            if optional and not environ.get(optional):
                names.add(optional)
        return sorted(names)

    def require_secrets(self, environ: Mapping[str, str]) -> None:
        """Check at start-up that every secret variable in use is set.

        Raises:
            ConfigError: naming each missing variable (never printing any value).
        """
        missing = self.missing_secrets(environ)
        if missing:
            raise ConfigError([f"environment variable {n} is not set" for n in missing])

    def masked(self) -> dict[str, Any]:
        """The effective config as plain data, with passwords in URLs masked."""
        data = self.model_dump(mode="json")
        data["store"]["url"] = mask_url(data["store"]["url"])
        if data["evidence"]["catalog_url"]:
            data["evidence"]["catalog_url"] = mask_url(data["evidence"]["catalog_url"])
        for route in data["routes"].values():
            if route.get("base_url"):
                route["base_url"] = mask_url(route["base_url"])
        return data


def validation_problems(
    err: ValidationError, model: type[BaseModel] | None = None, *, echo: bool = True
) -> list[str]:
    """One line per problem, naming the key at fault and what it takes, in a user's words.

    Unknown keys are named (with the closest known key when ``model`` is given), and a
    bad value is said back with what the field expects
    (:func:`foureyes.core.validation.explain_errors`). ``echo=False`` says only the kind
    of each value given, for input that may hold a person's data (observations, commits).
    """
    return [problem.message(echo=echo) for problem in explain_errors(err, model)]


def read_text_file(path: str | Path, what: str) -> str:
    """Read a UTF-8 text file the user named (``what`` says which: "config file", ...).

    Raises:
        ConfigError: the file does not exist or cannot be read as UTF-8.
    """
    file = Path(path)
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{what} {str(file)!r} does not exist"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{what} {str(file)!r} cannot be read: {exc}"]) from None


def load_config(
    path: str | Path | None = None, *, environ: Mapping[str, str] | None = None
) -> Config:
    """Load the effective config.

    Args:
        path: TOML file; when ``None``, ``FOUREYES_CONFIG`` names it, and when that is
            unset too, the built-in defaults are used.
        environ: the environment to read overrides from (``os.environ`` by default).

    Raises:
        ConfigError: the file is missing or not TOML, a key is unknown, a value is out of
            range, or a role names a route that does not exist.
    """
    env = dict(os.environ if environ is None else environ)
    chosen = path if path is not None else env.get(CONFIG_ENV) or None
    data: dict[str, Any] = {}
    if chosen is not None:
        file = Path(chosen)
        text = read_text_file(file, "config file")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([f"config file {str(file)!r} is not valid TOML: {exc}"]) from None
    try:
        return Config(**_merge_env(data, env))
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, Config)) from None


def _merge_env(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Overlay ``FOUREYES_SECTION__KEY=value`` variables on the file's data (a copy)."""
    merged: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for name in sorted(environ):
        if not name.startswith(_ENV_PREFIX) or name in (CONFIG_ENV, DATA_DIR_ENV):
            continue
        path = name[len(_ENV_PREFIX) :].lower().split("__")
        node = merged
        for part in path[:-1]:
            child = node.get(part)
            node[part] = child = dict(child) if isinstance(child, dict) else {}
            node = child
        node[path[-1]] = environ[name]
    return merged
