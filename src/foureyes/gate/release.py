"""Releases and delivery: the only object delivery accepts, and the check it makes first.

A :class:`Release` is made of parts, each with its own digest: the approved candidate
(by the digest its verdict named) and code-rendered parts, the restricted fallback or the
crisis-resource block that a restricted policy requires. Only :func:`compose_release`,
which the gate calls with its :class:`~foureyes.gate.gate.Decision`, makes one.
:func:`deliver` accepts nothing else, and before it hands text over it re-verifies every
part: the candidate's digest against the approved digest, each code-rendered part
against a fresh rendering, and the whole text against the digest recorded at minting.

The fallback part is the wording of the run's :class:`~foureyes.gate.fallback.ReplyMode`,
the team's own (``[gate] texts_file``) where it gives one; whatever that wording, the
resource block is a part of its own, so no text can remove it. :func:`crisis_reply` is
the crisis reply alone (the ``generation_prohibited`` fallback and its resources), for a
host that must show it without a run (an input guardrail that tripped).

A candidate with tool calls (:mod:`foureyes.gate.candidate`) is approved by the digest of
its text and its calls together; the release carries the calls, and delivery hands them
over only when the candidate part, with them, is the approved digest. A fallback never
carries a tool call.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from foureyes.core.digest import sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate.candidate import ToolCall, candidate_sha256
from foureyes.gate.fallback import FallbackTexts, ReplyMode, fallback_text
from foureyes.gate.gate import Decision, Outcome
from foureyes.risk.resources import (
    ResourceEntry,
    ResourceRegistry,
    default_registry,
    render_resources,
    resources_for,
)

__all__ = [
    "CrisisReply",
    "Delivery",
    "DeliveryRefused",
    "PART_SEPARATOR",
    "PartKind",
    "Release",
    "ReleasePart",
    "compose_release",
    "crisis_reply",
    "deliver",
]

PART_SEPARATOR = "\n\n"
"""What joins the parts of a release into the delivered text."""


class PartKind(StrEnum):
    """Where a part of a release comes from."""

    CANDIDATE = "candidate"
    """The Counselor's candidate, approved by digest."""
    FALLBACK = "fallback"
    """The restricted fallback reply, rendered by code."""
    RESOURCES = "resources"
    """The crisis-resource block, rendered by code from the verified registry."""


@dataclass(frozen=True, slots=True)
class ReleasePart:
    """One part of a release and the digest of its exact text."""

    kind: PartKind
    """Where it comes from."""
    text: str
    """The text."""
    sha256: str
    """SHA-256 of ``text``, taken when the release was minted."""


class DeliveryRefused(UsageError):
    """Raised when :func:`deliver` gets anything but an intact :class:`Release`.

    Only a bug or tampering gets here, since the gate never mints a release that fails
    these checks; nothing is delivered.
    """


@dataclass(frozen=True, slots=True)
class Delivery:
    """What :func:`deliver` hands over."""

    text: str
    """The text to send to the user."""
    sha256: str
    """SHA-256 of ``text`` (the response's ``delivered_sha256``)."""
    candidate_sha256: str | None
    """The approved candidate's digest, ``None`` for a fallback."""
    outcome: Outcome
    """Released or fallback."""
    reason: ReasonCode
    """The decision's reason."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The approved candidate's tool calls (none for a fallback)."""


class Release:
    """The only thing delivery accepts: approved text and code-rendered parts, by digest.

    Immutable, and made only by :func:`compose_release`.
    """

    __slots__ = (
        "_decision",
        "_locale",
        "_mode",
        "_parts",
        "_policy",
        "_region",
        "_registry",
        "_sha256",
        "_texts",
        "_tool_calls",
    )
    _decision: Decision
    _parts: tuple[ReleasePart, ...]
    _policy: GenerationPolicy
    _locale: Locale
    _region: str | None
    _registry: ResourceRegistry
    _sha256: str
    _mode: ReplyMode
    _texts: FallbackTexts | None
    _tool_calls: tuple[ToolCall, ...]

    def __init__(self) -> None:
        raise UsageError("a Release is minted by the gate (compose_release), never built")

    @property
    def decision(self) -> Decision:
        """The gate's decision this release carries out."""
        return self._decision

    @property
    def parts(self) -> tuple[ReleasePart, ...]:
        """The parts, in delivery order."""
        return self._parts

    @property
    def policy(self) -> GenerationPolicy:
        """The generation policy it was composed under."""
        return self._policy

    @property
    def locale(self) -> Locale:
        """The locale of its code-rendered parts."""
        return self._locale

    @property
    def region(self) -> str | None:
        """The region its resources were rendered for."""
        return self._region

    @property
    def mode(self) -> ReplyMode:
        """Whose draft was judged: it sets the fallback's wording."""
        return self._mode

    @property
    def texts(self) -> FallbackTexts | None:
        """The team's own fallback wording it was composed with, if any."""
        return self._texts

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The approved candidate's tool calls; none for a fallback."""
        return self._tool_calls

    @property
    def text(self) -> str:
        """The text to deliver: the parts joined."""
        return PART_SEPARATOR.join(part.text for part in self._parts)

    @property
    def sha256(self) -> str:
        """SHA-256 of :attr:`text`, taken when the release was minted."""
        return self._sha256

    @property
    def candidate_sha256(self) -> str | None:
        """The approved candidate's digest, ``None`` for a fallback."""
        return self._decision.approved_sha256

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Release is immutable; cannot set {name}")

    def __repr__(self) -> str:
        kinds = ", ".join(part.kind.value for part in self._parts)
        return f"Release({self._decision!r}, parts=[{kinds}], sha256={self._sha256!r})"


def _part(kind: PartKind, text: str) -> ReleasePart:
    return ReleasePart(kind, text, sha256_hex(text))


def compose_release(
    decision: Decision,
    candidate: str | None,
    *,
    policy: GenerationPolicy,
    locale: Locale,
    region: str | None,
    registry: ResourceRegistry | None = None,
    tool_calls: tuple[ToolCall, ...] = (),
    mode: ReplyMode = ReplyMode.SUPPORT,
    texts: FallbackTexts | None = None,
) -> Release:
    """Mint the release that carries out ``decision``.

    A released decision releases ``candidate`` (with ``tool_calls``) only if their digest
    is the approved one; any other text or call (a draft swapped after approval) turns
    the release into the ``verdict_mismatch`` fallback, which carries no tool call.
    Under a restricted or prohibited policy the code-rendered resource block is added.

    Args:
        decision: the gate's decision.
        candidate: the candidate text the caller holds.
        policy: the generation policy of the message.
        locale: the language of code-rendered parts.
        region: the user's region, for the resource block.
        registry: the crisis-resource registry (the packaged one by default).
        tool_calls: the candidate's tool calls, part of its digest.
        mode: whose draft was judged, for the fallback's wording.
        texts: the team's own fallback wording (built-in where it gives none).
    """
    listing = registry or default_registry()
    approved = (
        candidate
        if candidate is not None
        and candidate_sha256(candidate, tool_calls) == decision.approved_sha256
        else None
    )
    if decision.released and approved is None:
        # Invariant 1: a verdict for digest A never releases text B.
        decision = Decision.fallback(ReasonCode.VERDICT_MISMATCH)
    if decision.released and not policy.allows_generation:
        # Invariant 2: nothing approved goes out under a prohibition.
        decision = Decision.fallback(ReasonCode.GENERATION_PROHIBITED)
    parts = (
        [_part(PartKind.CANDIDATE, approved)]
        if decision.released and approved is not None
        else [
            _part(PartKind.FALLBACK, fallback_text(decision.reason, locale, mode=mode, texts=texts))
        ]
    )
    if policy is not GenerationPolicy.NORMAL:
        parts.append(_part(PartKind.RESOURCES, render_resources(locale, region, listing)))
    release = object.__new__(Release)
    for name, value in (
        ("_decision", decision),
        ("_parts", tuple(parts)),
        ("_policy", policy),
        ("_locale", locale),
        ("_region", region),
        ("_registry", listing),
        ("_sha256", sha256_hex(PART_SEPARATOR.join(p.text for p in parts))),
        ("_mode", mode),
        ("_texts", texts),
        ("_tool_calls", tool_calls if decision.released else ()),
    ):
        object.__setattr__(release, name, value)
    return release


def _expected_parts(release: Release) -> list[tuple[PartKind, str | None]]:
    """What the release must hold: kinds in order, and the text of code-rendered parts."""
    decision = release.decision
    expected: list[tuple[PartKind, str | None]] = (
        [(PartKind.CANDIDATE, None)]
        if decision.released
        else [
            (
                PartKind.FALLBACK,
                fallback_text(
                    decision.reason, release.locale, mode=release.mode, texts=release.texts
                ),
            )
        ]
    )
    if release.policy is not GenerationPolicy.NORMAL:
        rendered = render_resources(release.locale, release.region, release._registry)
        expected.append((PartKind.RESOURCES, rendered))
    return expected


def deliver(release: Release) -> Delivery:
    """Hand over a release's text after re-verifying every part of it.

    Raises:
        DeliveryRefused: ``release`` is not a :class:`Release`, or any part fails its
            check: a digest that does not match its text, a candidate that is not the
            approved digest, a code-rendered part that differs from a fresh rendering,
            a part missing or added, or a whole text other than the one minted.
    """
    if not isinstance(release, Release):
        raise DeliveryRefused(f"deliver() accepts only a Release, not {type(release).__name__}")
    decision = release.decision
    if decision.released and not release.policy.allows_generation:
        raise DeliveryRefused("a release under a prohibition")
    expected = _expected_parts(release)
    if [kind for kind, _ in expected] != [part.kind for part in release.parts]:
        raise DeliveryRefused("the release's parts are not the ones its decision calls for")
    for part, (_, rendered) in zip(release.parts, expected, strict=True):
        if sha256_hex(part.text) != part.sha256:
            raise DeliveryRefused(f"the {part.kind} part does not match its digest")
        if (
            part.kind is PartKind.CANDIDATE
            and candidate_sha256(part.text, release.tool_calls) != decision.approved_sha256
        ):
            raise DeliveryRefused("the candidate is not the approved digest")
        if rendered is not None and part.text != rendered:
            raise DeliveryRefused(f"the {part.kind} part is not what code renders")
    if release.tool_calls and not decision.released:
        raise DeliveryRefused("a fallback with tool calls")
    text = release.text
    digest = sha256_hex(text)
    if digest != release.sha256:
        raise DeliveryRefused("the delivered text is not the text that was minted")
    return Delivery(
        text=text,
        sha256=digest,
        candidate_sha256=decision.approved_sha256,
        outcome=decision.outcome,
        reason=decision.reason,
        tool_calls=release.tool_calls,
    )


@dataclass(frozen=True, slots=True)
class CrisisReply:
    """The code-rendered crisis reply: what the gate delivers under a prohibition."""

    text: str
    """The whole reply, as delivered: :attr:`wording`, a blank line, :attr:`resources_text`."""
    sha256: str
    """SHA-256 of :attr:`text`."""
    wording: str
    """The words before the resources (the ``prohibited`` fallback of the mode, the
    team's own where ``[gate] texts_file`` gives them)."""
    resources_text: str
    """The resource block, rendered by code from the verified registry."""
    resources: tuple[ResourceEntry, ...]
    """The entries that block lists, in its order (names, numbers, hours in every
    locale), for a host that shows them its own way; empty when the registry serves no
    such region (the block then says so and gives international guidance)."""
    locale: Locale
    """The language of the code-rendered text."""
    region: str | None
    """The region the resources were chosen for."""


def crisis_reply(
    locale: Locale,
    region: str | None,
    *,
    registry: ResourceRegistry | None = None,
    mode: ReplyMode = ReplyMode.SUPPORT,
    texts: FallbackTexts | None = None,
) -> CrisisReply:
    """The crisis reply the gate delivers under a prohibition, composed and delivered alike.

    It is minted and re-verified as a run's ``generation_prohibited`` release is, so its
    text is byte for byte what a prohibited run delivers in ``mode``.
    """
    listing = registry or default_registry()
    release = compose_release(
        Decision.fallback(ReasonCode.GENERATION_PROHIBITED),
        None,
        policy=GenerationPolicy.PROHIBITED,
        locale=locale,
        region=region,
        registry=listing,
        mode=mode,
        texts=texts,
    )
    delivery = deliver(release)
    wording, resources_text = (part.text for part in release.parts)
    return CrisisReply(
        text=delivery.text,
        sha256=delivery.sha256,
        wording=wording,
        resources_text=resources_text,
        resources=resources_for(locale, region, listing),
        locale=locale,
        region=region,
    )
