"""The review packet contract (docs/design.md 5): what a masked reviewer may hand back.

A reviewer's answer becomes a :class:`ReviewPacket` only through :func:`check_packet`, a
pure function that either returns a packet satisfying *every* rule below or a
:class:`PacketRejection` naming the first rule broken. There is no partially valid packet:
one bad item rejects the whole answer (docs/design.md 4, invariants 3 and 4).

The rules, checked in this order:

1. the answer is exactly one JSON object (whitespace and one ```` ``` ```` or
   ```` ```json ```` code fence around it allowed; prose before or after it, or a second
   value, break the contract), parsed by the one structured-output parser
   (:func:`foureyes.llm.structured.parse_structured` with ``whole=True``: strict JSON,
   exact keys, enum values only from their whitelists, no coercion). Stricter than the
   other model outputs, which allow prose around their one object: a ``no_update``
   followed by an ``update`` must not be read as either;
2. ``role`` is ``"masked-review"``;
3. ``no_update`` carries no ``items`` key at all (not even ``[]``); ``update`` carries
   at least one item;
4. every item's ``content`` has a visible character: blank once folded
   (:func:`foureyes.core.fold.normalise`), so zero-width and format characters, bidi
   controls and fillers such as U+3164 or U+2800 do not count;
5. no two items say the same thing: contents are compared folded the same way and
   trimmed (case-folded, invisible characters removed, so a zero-width space does not make
   a repeated item new), whatever their kind or certainty;
6. the packet's rendering (:meth:`ReviewPacket.render`) is at most ``max_chars``
   characters long.

Whether the answer may be checked at all (the call completed normally) is the runner's
question, settled before this module is reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import ContractError, UsageError
from foureyes.core.fold import normalise
from foureyes.llm.prompting import DATA_RULE
from foureyes.llm.structured import ParseFailure, parse_structured
from foureyes.review.projection import Mask

__all__ = [
    "Certainty",
    "EVIDENCE_BOUNDARY",
    "ItemKind",
    "PACKET_ROLE",
    "PacketCheck",
    "PacketItem",
    "PacketRejection",
    "PacketStatus",
    "ReviewPacket",
    "check_packet",
    "review_instruction",
]

PACKET_ROLE = "masked-review"
"""The only ``role`` a packet may name."""


class PacketStatus(StrEnum):
    """Whether the reviewer has something to add."""

    UPDATE = "update"
    """The reviewer adds at least one item."""
    NO_UPDATE = "no_update"
    """The reviewer has nothing to add; the packet carries no ``items`` key."""


class ItemKind(StrEnum):
    """What one item of a packet is."""

    OBSERVATION = "observation"
    """Something visible in the projected session."""
    CONCLUSION = "conclusion"
    """Something the reviewer infers from what it saw."""
    ASSUMPTION = "assumption"
    """Something the primary agent (or the reviewer) takes for granted without evidence."""
    UNKNOWN = "unknown"
    """Something that cannot be told from what the reviewer was shown."""
    POSSIBLE_ERROR = "possible_error"
    """A step, claim or result that may be wrong."""
    SUGGESTION = "suggestion"
    """A check or action the reviewer proposes."""


class Certainty(StrEnum):
    """How sure the reviewer says it is of one item."""

    CERTAIN = "certain"
    """Stated as fact."""
    LIKELY = "likely"
    """More probable than not."""
    UNCERTAIN = "uncertain"
    """A possibility worth checking."""


class PacketRejection(StrEnum):
    """Why a reviewer's answer is not a packet: the first contract rule it broke."""

    EMPTY = "empty"
    """The answer was empty or blank."""
    NO_JSON = "no_json"
    """The answer was prose: it holds no JSON object at all."""
    NOT_OBJECT = "not_object"
    """The answer is JSON, but not an object (an array, a string, a number)."""
    INVALID_JSON = "invalid_json"
    """Braces appear, but no complete strict JSON object (cut off, ``NaN``, duplicate keys)."""
    EXTRA_TEXT = "extra_text"
    """The answer holds more than the one object: prose before or after it, a second value."""
    EXTRA_KEYS = "extra_keys"
    """The packet or an item has a key the contract does not define."""
    ENUM_INVALID = "enum_invalid"
    """``status``, ``kind`` or ``certainty`` holds a value outside its whitelist."""
    SCHEMA_INVALID = "schema_invalid"
    """A key is missing or has the wrong JSON type (``items: null``, ``content: 3``)."""
    ROLE_MISMATCH = "role_mismatch"
    """``role`` is not ``"masked-review"``."""
    ITEMS_ON_NO_UPDATE = "items_on_no_update"
    """A ``no_update`` packet carries an ``items`` key (even an empty list)."""
    NO_ITEMS = "no_items"
    """An ``update`` packet carries no item."""
    EMPTY_CONTENT = "empty_content"
    """An item's content is empty or blank, invisible characters not counted."""
    DUPLICATE_ITEMS = "duplicate_items"
    """Two items say the same thing (folded, trimmed); the whole packet goes."""
    TOO_LONG = "too_long"
    """The rendered packet is longer than ``review.packet_max_chars``."""


_PARSE_REJECTIONS = {
    ParseFailure.EMPTY: PacketRejection.EMPTY,
    ParseFailure.NO_JSON: PacketRejection.NO_JSON,
    ParseFailure.NOT_OBJECT: PacketRejection.NOT_OBJECT,
    ParseFailure.INVALID_JSON: PacketRejection.INVALID_JSON,
    ParseFailure.EXTRA_FIELDS: PacketRejection.EXTRA_KEYS,
    ParseFailure.ENUM_INVALID: PacketRejection.ENUM_INVALID,
    ParseFailure.SCHEMA_INVALID: PacketRejection.SCHEMA_INVALID,
    ParseFailure.EXTRA_TEXT: PacketRejection.EXTRA_TEXT,
    # A second object is a second value besides the packet: the packet's own word for it.
    ParseFailure.SEVERAL_OBJECTS: PacketRejection.EXTRA_TEXT,
    # Truncation is a lifecycle fact the runner checks before parsing; should the parser
    # ever report it, the answer is still not a complete object.
    ParseFailure.TRUNCATED: PacketRejection.INVALID_JSON,
}


class _WireModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _WireItem(_WireModel):
    kind: ItemKind
    certainty: Certainty
    content: str


class _WirePacket(_WireModel):
    # ``role`` is a plain string here so that a wrong role is reported as a role
    # mismatch, not lost among enum errors.
    role: str
    status: PacketStatus
    items: tuple[_WireItem, ...] = ()


@dataclass(frozen=True, slots=True)
class PacketItem:
    """One statement of a packet."""

    kind: ItemKind
    """What the statement is."""
    certainty: Certainty
    """How sure the reviewer says it is."""
    content: str
    """The statement, exactly as the reviewer wrote it (never blank)."""

    @property
    def key(self) -> str:
        """The content folded and trimmed: what duplicates are compared by."""
        return normalise(self.content).text.strip()

    def as_json(self) -> dict[str, str]:
        """The item as the JSON object of the wire contract."""
        return {"kind": self.kind.value, "certainty": self.certainty.value, "content": self.content}


class ReviewPacket:
    """A packet that satisfies every contract rule; only :func:`check_packet` makes one.

    Immutable. Its identity is its rendering: two packets are equal when they render to
    the same bytes, and :attr:`sha256` is the digest of those bytes.
    """

    __slots__ = ("_items", "_rendered", "_status")
    _status: PacketStatus
    _items: tuple[PacketItem, ...]
    _rendered: str

    def __init__(self) -> None:
        raise UsageError("a ReviewPacket comes from check_packet()")

    @classmethod
    def _make(cls, status: PacketStatus, items: tuple[PacketItem, ...]) -> ReviewPacket:
        packet = object.__new__(cls)
        object.__setattr__(packet, "_status", status)
        object.__setattr__(packet, "_items", items)
        object.__setattr__(packet, "_rendered", canonical_json(_json_of(status, items)).decode())
        return packet

    @property
    def role(self) -> Literal["masked-review"]:
        """Always ``"masked-review"``."""
        return "masked-review"

    @property
    def status(self) -> PacketStatus:
        """``update`` or ``no_update``."""
        return self._status

    @property
    def items(self) -> tuple[PacketItem, ...]:
        """The items, in the reviewer's order (empty for ``no_update``)."""
        return self._items

    @property
    def is_update(self) -> bool:
        """Whether the reviewer added something."""
        return self._status is PacketStatus.UPDATE

    @property
    def sha256(self) -> str:
        """SHA-256 of :meth:`render` as UTF-8: the digest the packet is bound to."""
        return sha256_hex(self._rendered)

    def as_json(self) -> dict[str, Any]:
        """The packet as the JSON object of the wire contract (no ``items`` for no_update)."""
        return _json_of(self._status, self._items)

    def render(self) -> str:
        """Deterministic one-line JSON: sorted keys, no spaces, non-ASCII kept as is.

        Line breaks inside contents are escaped, so the rendering is always one line, and
        the same packet always renders to the same characters.
        """
        return self._rendered

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ReviewPacket is immutable; cannot set {name}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReviewPacket):
            return NotImplemented
        return self._rendered == other._rendered

    def __hash__(self) -> int:
        return hash(self._rendered)

    def __repr__(self) -> str:
        return f"ReviewPacket({self._rendered})"


def _json_of(status: PacketStatus, items: tuple[PacketItem, ...]) -> dict[str, Any]:
    data: dict[str, Any] = {"role": PACKET_ROLE, "status": status.value}
    if status is PacketStatus.UPDATE:
        data["items"] = [item.as_json() for item in items]
    return data


@dataclass(frozen=True, slots=True)
class PacketCheck:
    """The result of checking one answer: a packet, or the rule it broke. Never both."""

    packet: ReviewPacket | None
    """The accepted packet, or ``None``."""
    rejection: PacketRejection | None
    """The first rule broken, or ``None`` when accepted."""
    detail: str = field(default="", compare=False)
    """Short human-readable detail of a rejection (field paths, sizes); no model text."""

    @property
    def ok(self) -> bool:
        """Whether the answer is a packet."""
        return self.packet is not None


def _reject(rejection: PacketRejection, detail: str = "") -> PacketCheck:
    return PacketCheck(packet=None, rejection=rejection, detail=detail)


def check_packet(text: str, *, max_chars: int) -> PacketCheck:
    """Check a reviewer's answer against the packet contract (the rules in the module doc).

    Args:
        text: the reviewer's visible answer, as it came back.
        max_chars: ``review.packet_max_chars``; the rendering may not be longer.

    Returns:
        A :class:`PacketCheck` holding either the packet or the first rule broken.

    Raises:
        UsageError: ``max_chars`` is below one.
    """
    if max_chars < 1:
        raise UsageError(f"max_chars must be at least 1, got {max_chars}")
    try:
        wire = parse_structured(text, _WirePacket, whole=True)
    except ContractError as exc:
        return _reject(_PARSE_REJECTIONS[ParseFailure(exc.reason)], exc.detail)
    if wire.role != PACKET_ROLE:
        return _reject(PacketRejection.ROLE_MISMATCH, f"role must be {PACKET_ROLE!r}")
    has_items_key = "items" in wire.model_fields_set
    if wire.status is PacketStatus.NO_UPDATE and has_items_key:
        return _reject(PacketRejection.ITEMS_ON_NO_UPDATE, f"{len(wire.items)} item(s) given")
    if wire.status is PacketStatus.UPDATE and not wire.items:
        return _reject(PacketRejection.NO_ITEMS)
    items = tuple(PacketItem(i.kind, i.certainty, i.content) for i in wire.items)
    blank = [n for n, item in enumerate(items) if not normalise(item.content).text.strip()]
    if blank:
        return _reject(PacketRejection.EMPTY_CONTENT, f"items {blank}")
    seen: dict[str, int] = {}
    for n, item in enumerate(items):
        if item.key in seen:
            return _reject(PacketRejection.DUPLICATE_ITEMS, f"items {seen[item.key]} and {n}")
        seen[item.key] = n
    packet = ReviewPacket._make(wire.status, items)
    size = len(packet.render())
    if size > max_chars:
        return _reject(PacketRejection.TOO_LONG, f"{size} characters, at most {max_chars}")
    return PacketCheck(packet=packet, rejection=None)


_SEEN = {
    Mask.NONE: (
        "You see its goal, its messages, its reasoning, the actions it took and their results."
    ),
    Mask.REASONING_ONLY: (
        "You see its goal, its visible messages, the actions it took and their results; its "
        "reasoning in the steps under review is not shown to you."
    ),
    Mask.ACTION_ONLY: (
        "You see its goal, the actions it took and their results; its reasoning and its "
        "messages in the steps under review are not shown to you."
    ),
}
"""What a reviewer is told it sees, per mask: only what is true of that mask."""

EVIDENCE_BOUNDARY = (
    "Judge whether the observable actions and outcomes support the agent's continuation; "
    "do not invent motivations or reasons the agent did not state."
)
"""The evidence boundary every review instruction carries."""


def review_instruction(*, max_chars: int, mask: Mask) -> str:
    """The instruction that asks a reviewer for a packet: the last user message of a review.

    It says what the reviewer sees under ``mask`` and nothing that is not true of it (the
    unmasked control is not told that reasoning may be hidden), the
    :data:`EVIDENCE_BOUNDARY`, the whole contract (the rules :func:`check_packet`
    enforces) and :data:`~foureyes.llm.prompting.DATA_RULE`, because in ``cache-aligned``
    mode the system prompt is the primary agent's and cannot carry it.
    """
    kinds = ", ".join(f'"{k.value}"' for k in ItemKind)
    certainties = ", ".join(f'"{c.value}"' for c in Certainty)
    return (
        "Stop acting as the agent above. You are now an independent reviewer of that agent's "
        f"session. {_SEEN[mask]} {EVIDENCE_BOUNDARY} "
        f"{DATA_RULE}\n\n"
        "Answer with exactly one JSON object and nothing else: no prose, no code fence, no "
        "tool call. If you have nothing to add, answer "
        f'{{"role": "{PACKET_ROLE}", "status": "no_update"}} (with no "items" key). '
        "Otherwise answer "
        f'{{"role": "{PACKET_ROLE}", "status": "update", "items": [{{"kind": ..., '
        '"certainty": ..., "content": ...}]} with at least one item, where "kind" is one of '
        f'{kinds}, "certainty" is one of {certainties}, and "content" is one short, '
        "non-empty statement. Never repeat an item: an answer with two items saying the same "
        f"thing is discarded whole, and so is an answer longer than {max_chars} characters. "
        'Use "suggestion" for the cheapest check that would tell whether the agent is right.'
    )
