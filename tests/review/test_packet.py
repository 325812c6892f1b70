"""The packet contract (docs/design.md 5) as a pure function: every rule, every rejection."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.errors import UsageError
from foureyes.review.packet import (
    EVIDENCE_BOUNDARY,
    PACKET_ROLE,
    Certainty,
    ItemKind,
    PacketRejection,
    PacketStatus,
    ReviewPacket,
    check_packet,
    review_instruction,
)
from foureyes.review.projection import Mask

MAX = 10_000


def item(content: str, kind: str = "observation", certainty: str = "likely") -> dict[str, str]:
    return {"kind": kind, "certainty": certainty, "content": content}


def update(*contents: str) -> dict[str, Any]:
    return {"role": PACKET_ROLE, "status": "update", "items": [item(c) for c in contents]}


def check(value: Any, max_chars: int = MAX) -> PacketRejection | ReviewPacket:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    result = check_packet(text, max_chars=max_chars)
    assert (result.packet is None) != (result.rejection is None)
    assert result.ok == (result.packet is not None)
    return result.packet if result.packet is not None else result.rejection  # type: ignore[return-value]


def test_a_valid_update_is_accepted_with_its_items_in_order() -> None:
    packet = check(update("tests were never run", "the patch edits the wrong file"))
    assert isinstance(packet, ReviewPacket)
    assert packet.status is PacketStatus.UPDATE and packet.is_update
    assert [i.content for i in packet.items] == [
        "tests were never run",
        "the patch edits the wrong file",
    ]
    assert packet.items[0].kind is ItemKind.OBSERVATION
    assert packet.items[0].certainty is Certainty.LIKELY
    assert packet.role == PACKET_ROLE


def test_a_valid_no_update_has_no_items_key() -> None:
    packet = check({"role": PACKET_ROLE, "status": "no_update"})
    assert isinstance(packet, ReviewPacket)
    assert packet.items == () and not packet.is_update
    assert packet.as_json() == {"role": PACKET_ROLE, "status": "no_update"}
    assert packet.render() == '{"role":"masked-review","status":"no_update"}'


@pytest.mark.parametrize(
    ("answer", "rejection"),
    [
        ("", PacketRejection.EMPTY),
        ("   \n", PacketRejection.EMPTY),
        ("The agent looks fine to me; nothing to add.", PacketRejection.NO_JSON),
        ('["masked-review"]', PacketRejection.NOT_OBJECT),
        ('{"role": "masked-review", "status": "no_update"', PacketRejection.INVALID_JSON),
        ('{"role": "masked-review", "role": "masked-review", "status": "no_update"}',
         PacketRejection.INVALID_JSON),
        ({"role": PACKET_ROLE, "status": "no_update", "note": "x"}, PacketRejection.EXTRA_KEYS),
        ({**update("a"), "items": [{**item("a"), "source": "me"}]}, PacketRejection.EXTRA_KEYS),
        ({"role": PACKET_ROLE, "status": "maybe"}, PacketRejection.ENUM_INVALID),
        ({**update("a"), "items": [item("a", kind="opinion")]}, PacketRejection.ENUM_INVALID),
        ({**update("a"), "items": [item("a", certainty="sure")]}, PacketRejection.ENUM_INVALID),
        ({"status": "no_update"}, PacketRejection.SCHEMA_INVALID),
        ({"role": PACKET_ROLE, "status": "update", "items": None}, PacketRejection.SCHEMA_INVALID),
        ({**update("a"), "items": [{**item("a"), "content": 3}]}, PacketRejection.SCHEMA_INVALID),
        ({"role": "reviewer", "status": "no_update"}, PacketRejection.ROLE_MISMATCH),
        ({"role": "Masked-Review", "status": "no_update"}, PacketRejection.ROLE_MISMATCH),
        ({"role": PACKET_ROLE, "status": "no_update", "items": []},
         PacketRejection.ITEMS_ON_NO_UPDATE),
        ({**update("a"), "status": "no_update"}, PacketRejection.ITEMS_ON_NO_UPDATE),
        ({"role": PACKET_ROLE, "status": "update"}, PacketRejection.NO_ITEMS),
        ({"role": PACKET_ROLE, "status": "update", "items": []}, PacketRejection.NO_ITEMS),
        (update("fine", ""), PacketRejection.EMPTY_CONTENT),
        (update(" \t\n"), PacketRejection.EMPTY_CONTENT),
        # Characters nobody sees: zero-width, word joiner, bidi controls, fillers.
        (update("\u200b"), PacketRejection.EMPTY_CONTENT),
        (update("fine", "\u2060\u200d \u00ad"), PacketRejection.EMPTY_CONTENT),
        (update("\u202e\u2066\u2069\u200f"), PacketRejection.EMPTY_CONTENT),
        (update("\u3164"), PacketRejection.EMPTY_CONTENT),
        (update("\u2800\u2800\uffa0"), PacketRejection.EMPTY_CONTENT),
        (update("Tests fail", "  tests FAIL "), PacketRejection.DUPLICATE_ITEMS),
        (update("Straße", "STRASSE"), PacketRejection.DUPLICATE_ITEMS),
    ],
)  # fmt: skip
def test_each_broken_rule_rejects_the_whole_answer(answer: Any, rejection: PacketRejection) -> None:
    assert check(answer) is rejection


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(["\u200b", "\u2060", "\u202e", "\u2066", "\u3164", "\u2800", "\u0301"]),
        max_size=6,
    ),
    st.lists(st.sampled_from([" ", "\t", "\n", "\u3000", "\u00a0", "\u2009"]), max_size=6),
)
def test_content_of_invisible_characters_and_spaces_only_is_empty(
    invisible: list[str], spaces: list[str]
) -> None:
    content = "".join(invisible + spaces)
    assert check(update("a visible item", content)) is PacketRejection.EMPTY_CONTENT
    # The same characters around a visible one are a valid item, kept as written.
    packet = check(update("a visible item", content + "x" + content))
    assert isinstance(packet, ReviewPacket) and packet.items[1].content == content + "x" + content


def test_duplicates_reject_whatever_their_kind_and_certainty() -> None:
    packet = update("x")
    packet["items"] = [item("the build is red"), item("The build is red", "conclusion", "certain")]
    assert check(packet) is PacketRejection.DUPLICATE_ITEMS


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=15),
            st.sampled_from(["\u200b", "\u2060", "\u202e", "\u2066", "\u00ad", "\ufeff"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_invisible_characters_do_not_make_a_repeated_item_new(
    insertions: list[tuple[int, str]],
) -> None:
    disguised = "the build is red"
    for at, char in insertions:
        disguised = disguised[:at] + char + disguised[at:]
    packet = update("x")
    packet["items"] = [item("the build is red"), item(disguised)]
    assert check(packet) is PacketRejection.DUPLICATE_ITEMS


def sized(chars: int) -> dict[str, Any]:
    """An update whose rendering is exactly ``chars`` characters long."""
    base = check(update("x"))
    assert isinstance(base, ReviewPacket)
    return update("x" * (chars - len(base.render()) + 1))


def test_the_rendering_may_reach_the_limit_but_not_pass_it() -> None:
    at_limit = check(sized(MAX))
    assert isinstance(at_limit, ReviewPacket) and len(at_limit.render()) == MAX
    assert check(sized(MAX + 1)) is PacketRejection.TOO_LONG
    assert check(sized(MAX + 1), max_chars=MAX + 1) == check(sized(MAX + 1), max_chars=MAX + 1)


def test_size_counts_the_rendering_not_the_answer_layout() -> None:
    # Pretty-printing adds characters the rendering does not have.
    pretty = json.dumps(sized(MAX), indent=8)
    assert len(pretty) > MAX
    assert isinstance(check(pretty), ReviewPacket)


@pytest.mark.parametrize(
    "layout",
    ["{}", "  {}\n", "```json\n{}\n```", "```\n{}\n```", " ```JSON\n  {}  \n``` \n"],
    ids=["bare", "whitespace", "json-fence", "plain-fence", "fence-and-whitespace"],
)
def test_whitespace_and_one_code_fence_are_allowed(layout: str) -> None:
    body = json.dumps(update("a"))
    assert check(layout.replace("{}", body)) == check(body)
    assert isinstance(check(body), ReviewPacket)


NO_UPDATE = json.dumps({"role": PACKET_ROLE, "status": "no_update"})


@pytest.mark.parametrize(
    "answer",
    [
        f"Here it is: {json.dumps(update('a'))}",
        f"{json.dumps(update('a'))} (end)",
        f"{NO_UPDATE}\n{json.dumps(update('the tests were never run'))}",
        f"{json.dumps(update('a'))} {NO_UPDATE}",
        f"Sure.\n```json\n{NO_UPDATE}\n```",
        f"```json\n{NO_UPDATE}\n```\nDone.",
        f"```here is my review\n{NO_UPDATE}\n```",
        f"```json\n{NO_UPDATE}\n{NO_UPDATE}\n```",
    ],
    ids=[
        "prose-before",
        "prose-after",
        "no-update-then-update",
        "update-then-no-update",
        "prose-before-fence",
        "prose-after-fence",
        "prose-as-fence-info",
        "two-objects-in-a-fence",
    ],
)
def test_anything_besides_the_one_object_is_malformed(answer: str) -> None:
    assert check(answer) is PacketRejection.EXTRA_TEXT


def test_rendering_is_one_deterministic_line_bound_to_its_digest() -> None:
    a = check(update("line one\nline two", '引号 "and" 中文'))
    b = check(json.dumps(update("line one\nline two", '引号 "and" 中文'), indent=2))
    assert isinstance(a, ReviewPacket) and isinstance(b, ReviewPacket)
    assert a == b and hash(a) == hash(b)
    assert "\n" not in a.render() and "中文" in a.render()
    assert json.loads(a.render()) == a.as_json()
    assert a.sha256 == b.sha256 and len(a.sha256) == 64
    assert repr(a).startswith("ReviewPacket(")


def test_a_packet_cannot_be_made_or_changed_outside_the_contract() -> None:
    with pytest.raises(UsageError):
        ReviewPacket()
    packet = check(update("a"))
    assert isinstance(packet, ReviewPacket)
    with pytest.raises(AttributeError):
        packet._status = PacketStatus.NO_UPDATE  # type: ignore[misc]
    with pytest.raises(UsageError):
        check_packet("{}", max_chars=0)


@pytest.mark.parametrize("mask", list(Mask))
def test_instruction_states_the_contract_and_the_data_rule(mask: Mask) -> None:
    text = review_instruction(max_chars=1234, mask=mask)
    assert "1234" in text and "<<<DATA" in text and PACKET_ROLE in text
    for value in [*ItemKind, *Certainty, *PacketStatus]:
        assert f'"{value.value}"' in text
    assert EVIDENCE_BOUNDARY in text and "do not invent motivations" in text


def test_each_masks_instruction_says_only_what_is_true_of_it() -> None:
    control = review_instruction(max_chars=500, mask=Mask.NONE)
    masked = review_instruction(max_chars=500, mask=Mask.REASONING_ONLY)
    actions = review_instruction(max_chars=500, mask=Mask.ACTION_ONLY)
    # The unmasked control is not told that reasoning may be hidden from it.
    assert "not shown" not in control and "may not be shown" not in control
    assert "its reasoning," in control
    assert "reasoning in the steps under review is not shown" in masked
    assert "its visible messages" in masked
    assert "its reasoning and its messages in the steps under review are not shown" in actions
    assert "visible messages" not in actions
    assert len({control, masked, actions}) == 3


# --- property: a packet is accepted exactly when it satisfies every rule -----------------

KINDS = [k.value for k in ItemKind] + ["opinion"]
CERTAINTIES = [c.value for c in Certainty] + ["sure"]
contents = st.sampled_from(["", " ", "a", "A ", "tests fail", "Tests Fail", "ß", "ss", "x" * 50])
items = st.fixed_dictionaries(
    {"kind": st.sampled_from(KINDS), "certainty": st.sampled_from(CERTAINTIES), "content": contents}
)
packets = st.fixed_dictionaries(
    {
        "role": st.sampled_from([PACKET_ROLE, "reviewer"]),
        "status": st.sampled_from(["update", "no_update", "maybe"]),
    },
    optional={"items": st.lists(items, max_size=4)},
)


def satisfies_contract(data: dict[str, Any], max_chars: int) -> bool:
    """An oracle written independently of packet.py."""
    if data["role"] != "masked-review" or data["status"] not in ("update", "no_update"):
        return False
    entries = data.get("items") or []
    if data["status"] == "no_update" and "items" in data:
        return False
    if data["status"] == "update" and not entries:
        return False
    for entry in entries:
        if entry["kind"] not in KINDS[:-1] or entry["certainty"] not in CERTAINTIES[:-1]:
            return False
        if not entry["content"].strip():
            return False
    keys = [e["content"].strip().casefold() for e in entries]
    if len(set(keys)) != len(keys):
        return False
    rendering = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return len(rendering) <= max_chars


@settings(max_examples=300)
@given(packets, st.integers(min_value=40, max_value=400))
def test_accepted_exactly_when_every_rule_holds(data: dict[str, Any], max_chars: int) -> None:
    result = check_packet(json.dumps(data), max_chars=max_chars)
    assert result.ok == satisfies_contract(data, max_chars)
    if result.packet is not None:
        assert result.packet.as_json() == data  # whole, never a subset of the items


# Contents with a letter or digit in any locale, and no invisible characters, so that
# every generated packet is valid whatever the content check counts as blank.
contents = st.text(alphabet="abcXYZ 019,.!中文字", min_size=1, max_size=30).filter(
    lambda c: any(ch.isalnum() for ch in c)
)
valid_packets = st.one_of(
    st.just({"role": PACKET_ROLE, "status": "no_update"}),
    st.builds(
        lambda entries: {"role": PACKET_ROLE, "status": "update", "items": entries},
        st.lists(
            st.builds(
                item, contents, st.sampled_from(KINDS[:-1]), st.sampled_from(CERTAINTIES[:-1])
            ),
            min_size=1,
            max_size=4,
            unique_by=lambda e: e["content"].strip().casefold(),
        ),
    ),
)
blank = st.text(alphabet=" \t\r\n", max_size=4)
fences = st.sampled_from(
    [("", ""), ("```json\n", "\n```"), ("```\n", "```"), ("```JSON\n", "\n```")]
)
# Anything but whitespace, without a backtick (prose around the answer must not form a fence).
prose = st.text(st.characters(exclude_characters="`"), min_size=1, max_size=20).filter(str.strip)


def layout(data: dict[str, Any], indent: int | None) -> str:
    return json.dumps(data, ensure_ascii=False, indent=indent)


@settings(max_examples=200)
@given(valid_packets, st.sampled_from([None, 2]), fences, blank, blank, blank, blank)
def test_any_valid_packet_in_whitespace_and_a_fence_is_accepted(
    data: dict[str, Any],
    indent: int | None,
    fence: tuple[str, str],
    before: str,
    inside_before: str,
    inside_after: str,
    after: str,
) -> None:
    opening, closing = fence
    text = before + opening + inside_before + layout(data, indent) + inside_after + closing + after
    packet = check(text)
    assert isinstance(packet, ReviewPacket) and packet.as_json() == data


@settings(max_examples=200)
@given(valid_packets, st.sampled_from([None, 2]), fences, prose, st.booleans())
def test_any_text_besides_the_packet_makes_it_malformed(
    data: dict[str, Any], indent: int | None, fence: tuple[str, str], extra: str, first: bool
) -> None:
    opening, closing = fence
    wrapped = opening + layout(data, indent) + closing
    text = extra + wrapped if first else wrapped + extra
    assert not isinstance(check(text), ReviewPacket)
    if not set(extra) & set('{}[]"') and fence == ("", ""):
        assert check(text) is PacketRejection.EXTRA_TEXT


@settings(max_examples=200)
@given(
    valid_packets,
    st.one_of(valid_packets, st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)),
    fences,
    blank,
)
def test_a_second_object_makes_the_packet_malformed(
    data: dict[str, Any], second: dict[str, Any], fence: tuple[str, str], between: str
) -> None:
    opening, closing = fence
    text = opening + layout(data, None) + between + json.dumps(second) + closing
    assert check(text) is PacketRejection.EXTRA_TEXT
