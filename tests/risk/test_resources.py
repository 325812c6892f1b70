from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.errors import ConfigError
from foureyes.core.locale import Locale
from foureyes.risk.resources import (
    ResourceKind,
    SourceKind,
    default_registry,
    find_phone_numbers,
    load_registry,
    registry_from_file,
    render_resources,
    resources_for,
    secondary_entries,
    stale_entries,
    unverified_numbers,
)
from tests.helpers.resources import resource_entry

REGISTRY = default_registry()


def test_the_packaged_registry_lists_the_well_known_hotlines() -> None:
    numbers = {(e.region, n) for e in REGISTRY.entries for n in e.numbers}
    assert {
        ("US", "988"),
        ("CN", "12356"),
        ("CN", "010-82951332"),
        ("HK", "2389 2222"),
        ("TW", "1925"),
        ("GB", "116 123"),
    } <= numbers
    for entry in REGISTRY.entries:
        # Every entry names the public page it was checked against, not a description.
        assert entry.source.startswith("http") and entry.checked >= dt.date(2026, 11, 30)
        assert entry.review_days == 180
        assert all(entry.name[loc] and entry.hours[loc] for loc in Locale)


# Each region added in issue 14 with the numbers its sources list (see resources.json).
NEW_REGIONS = {
    "AU": ["13 11 14", "000"],
    "CA": ["988", "911"],
    "DE": ["0800 111 0 111", "0800 111 0 222", "112"],
    "ES": ["024", "112"],
    "FR": ["3114", "112"],
    "IE": ["116 123", "112"],
    "IN": ["14416", "112"],
    "JP": ["0120-279-338", "119"],
    "KR": ["109", "119", "112"],
    "MY": ["15555", "999"],
    "NZ": ["1737", "111"],
    "SG": ["1767", "1771", "995"],
}


@pytest.mark.parametrize(("region", "numbers"), sorted(NEW_REGIONS.items()))
@pytest.mark.parametrize("locale", list(Locale))
def test_each_new_region_renders_its_own_lines(
    locale: Locale, region: str, numbers: list[str]
) -> None:
    text = render_resources(locale, region)
    assert all(number in text for number in numbers)
    assert REGISTRY.regions[region][locale] in text
    assert {e.region for e in resources_for(locale, region)} == {region}
    assert all(e.source.startswith("http") for e in REGISTRY.entries_for(region))


@pytest.mark.parametrize("region", sorted(REGISTRY.regions))
def test_every_shipped_region_has_a_crisis_line_and_an_emergency_number_with_hours(
    region: str,
) -> None:
    entries = REGISTRY.entries_for(region)
    assert {e.kind for e in entries} == set(ResourceKind)
    for locale in Locale:
        lines = render_resources(locale, region).splitlines()
        # Each line is shown with when it answers, so a user knows whether to call now.
        for entry in entries:
            [shown] = [line for line in lines if entry.name[locale] in line]
            assert shown.endswith((f"({entry.hours[locale]})", f"（{entry.hours[locale]}）"))


@pytest.mark.parametrize(("region", "numbers"), sorted(NEW_REGIONS.items()))
def test_the_phone_rule_accepts_each_new_region_numbers_and_no_made_up_one(
    region: str, numbers: list[str]
) -> None:
    for number in numbers:
        assert unverified_numbers(f"Please call {number} now.", region=region) == ()
    made_up = "Please call 0800 123 4567 now."
    assert [m.digits for m in unverified_numbers(made_up, region=region)] == ["08001234567"]
    # Another region's line is not this region's.
    assert unverified_numbers("Please call 1767 now.", region="NZ") != ()


def test_a_number_its_secondary_sources_disagree_on_is_not_verified() -> None:
    # Tele-MANAS's long number is given as 1-800-891-4416 and as 1-800-91-4416 by
    # secondary pages and no official page settles it; only 14416 is listed.
    for number in ("1-800-891-4416", "1800-91-4416"):
        assert unverified_numbers(f"Please call {number} now.", region="IN") != ()


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Call 988 tonight.", ["988"]),
        ("Samaritans: 116 123, any time.", ["116 123"]),
        ("北京心理危机研究与干预中心 010-82951332。", ["010-82951332"]),
        ("請撥打 2389 2222（24小時）", ["2389 2222"]),
        ("请拨打１２３５６。", ["１２３５６"]),
        ("全角 ０１０－８２９５１３３２ 也算", ["０１０－８２９５１３３２"]),
        ("+1 (800) 273-8255 is an old number.", ["+1 (800) 273-8255"]),
        ("+86 10 8295 1332", ["+86 10 8295 1332"]),
        ("Dial 110 or 120 now", ["110", "120"]),
        ("text the number 4321 for help", ["4321"]),
        ("I hear you. It has been 3 days and 24/7 worry.", []),
        ("In 2024 things changed, and 365 days later too.", []),
    ],
)
def test_every_phone_number_is_found(text: str, found: list[str]) -> None:
    assert [m.text for m in find_phone_numbers(text)] == found


@pytest.mark.parametrize(
    "number",
    [
        "400\u2009161\u20099995",  # thin space
        "400\u202f161\u202f9995",  # narrow no-break space
        "400\u2007161\u20079995",  # figure space
        "400\u2002161\u20029995",  # en space
        "400\u200a161\u200a9995",  # hair space
        "400\u2013161\u20139995",  # en dash
        "400\t161\t9995",
        "400·161·9995",
        "400\n161\r\n9995",
        "400\u2028161\u20299995",  # line and paragraph separators
        "4\u200b0\u200c0\u200d1\u20606\ufeff1\u00ad9995",  # zero-width and format characters
        "400\u202e161\u2066\u20699995",  # bidi controls
        "4\u03010\u03360\u20e316\ufe0f19995",  # combining marks, a variation selector
        "四零零一六一九九九五",
        "四〇〇-一六一-九九九五",
        "肆零零壹陆壹玖玖玖伍",
        "４００\u3000１６１\u3000９９９５",
    ],
)
def test_a_number_is_found_however_its_digits_are_joined_or_written(number: str) -> None:
    text = f"请拨打 {number} 求助"
    [mention] = find_phone_numbers(text)
    assert (mention.text, mention.digits) == (number, "4001619995")
    assert text[mention.start : mention.end] == number
    assert [m.text for m in unverified_numbers(text, region="CN")] == [number]


def test_a_listed_number_in_chinese_numerals_is_verified() -> None:
    assert unverified_numbers("请拨打 幺贰叁伍陆 或 幺幺零", region="CN") == ()
    [mention] = unverified_numbers("请拨打 一二三四五六七八", region="CN")
    assert mention.digits == "12345678"


@pytest.mark.parametrize(
    "text",
    [
        "我一直在想你，一个人也要好好吃饭。",
        "二〇二四年三月，我们一起走过了三个城市。",
        "数到三，深呼吸：一、二、三。",
    ],
)
def test_chinese_numerals_in_prose_are_not_numbers(text: str) -> None:
    assert find_phone_numbers(text) == ()


def test_mentions_carry_spans_and_ascii_digits() -> None:
    text = "x ０１０－８２９５１３３２ y"
    [mention] = find_phone_numbers(text)
    assert text[mention.start : mention.end] == mention.text
    assert mention.digits == "01082951332" and mention.e164 is None
    [intl] = find_phone_numbers("call +852 2389 2222")
    assert intl.e164 == "+85223892222"


@pytest.mark.parametrize(
    ("text", "region", "unverified"),
    [
        ("Call 988.", "US", []),
        ("Call 988.", "CN", ["988"]),
        ("Call 988.", None, []),
        ("致电 010-82951332 或 12356", "CN", []),
        ("致电 +86 10 8295 1332", "CN", []),
        ("致电 8295 1332", "CN", ["8295 1332"]),
        ("撥打 2389 2222", "HK", []),
        ("撥打 +852 2389 2222", "HK", []),
        ("撥打 2389 2222", "TW", ["2389 2222"]),
        ("Call 116 123 or 999.", "GB", []),
        ("Call 1-800-273-8255.", "US", ["1-800-273-8255"]),
        ("Call 555-0100.", None, ["555-0100"]),
    ],
)
def test_numbers_outside_the_registry_for_the_region_are_reported(
    text: str, region: str | None, unverified: list[str]
) -> None:
    assert [m.text for m in unverified_numbers(text, region=region)] == unverified


@pytest.mark.parametrize("region", ["CN", "HK", "TW", "US", "GB", "JP", "DE"])
@pytest.mark.parametrize("locale", list(Locale))
def test_rendered_resources_hold_only_registry_numbers(locale: Locale, region: str | None) -> None:
    text = render_resources(locale, region)
    shown = resources_for(locale, region)
    assert shown
    for entry in shown:
        assert entry.name[locale] in text
        assert all(number in text for number in entry.numbers)
    listed_region = region if region in REGISTRY.regions else None
    assert unverified_numbers(text, region=listed_region) == ()


def test_a_known_region_gets_its_own_entries_crisis_lines_first() -> None:
    entries = resources_for(Locale.EN, "CN")
    assert {e.region for e in entries} == {"CN"}
    assert entries[0].kind is ResourceKind.CRISIS_LINE
    assert entries[-1].kind is ResourceKind.EMERGENCY


UNKNOWN_NOTICE = {
    Locale.EN: "We do not have verified crisis lines for where you are.",
    Locale.ZH_HANS: "我们没有你所在地区经过核实的危机热线。",
    Locale.ZH_HANT: "我們沒有你所在地區經過核實的危機熱線。",
}


@pytest.mark.parametrize("region", [None, "PT", "ZZ"])
@pytest.mark.parametrize("locale", list(Locale))
def test_an_unknown_region_is_told_so_and_given_no_other_country_lines(
    locale: Locale, region: str | None
) -> None:
    assert resources_for(locale, region) == ()
    text = render_resources(locale, region)
    assert UNKNOWN_NOTICE[locale] in text
    assert "findahelpline.com" in text
    assert (
        "emergency number"
        if locale is Locale.EN
        else "紧急电话"
        if locale is Locale.ZH_HANS
        else "緊急電話"
    ) in text
    assert find_phone_numbers(text) == ()
    for entry in REGISTRY.entries:
        assert entry.name[locale] not in text


def test_rendering_is_deterministic_and_localised() -> None:
    assert render_resources(Locale.ZH_HANT, "TW") == render_resources(Locale.ZH_HANT, "TW")
    assert "衛福部安心專線（台灣）：1925（24小時）" in render_resources(Locale.ZH_HANT, "TW")
    assert "Samaritans (United Kingdom): 116 123 (24 hours, free)" in render_resources(
        Locale.EN, "GB"
    )


def test_entries_older_than_the_limit_are_reported_stale() -> None:
    assert stale_entries(REGISTRY, today=dt.date(2027, 5, 1), max_age_days=365) == ()
    stale = stale_entries(REGISTRY, today=dt.date(2028, 1, 1), max_age_days=365)
    assert stale == REGISTRY.entries


def test_an_entry_past_its_own_review_period_is_stale() -> None:
    # Checked 2026-12-01 with a 180-day review: due 2027-05-30.
    due = dt.date(2026, 12, 1) + dt.timedelta(days=180)
    fresh = {e.id for e in stale_entries(REGISTRY, today=due)}
    late = {e.id for e in stale_entries(REGISTRY, today=due + dt.timedelta(days=1))}
    assert "au-lifeline" not in fresh and "au-lifeline" in late
    assert stale_entries(REGISTRY, today=dt.date(2026, 12, 2)) == ()


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "resources.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def packaged() -> dict[str, Any]:
    return REGISTRY.model_dump(mode="json")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d["entries"][0]["name"].pop("zh-Hant"), "lacks locale"),
        (lambda d: d["entries"][0].update(numbers=["12 34a"]), "is not digits"),
        (lambda d: d["entries"][1].update(id=d["entries"][0]["id"]), "unique"),
        (lambda d: d["regions"].pop("CN"), "regions without names: CN"),
        (lambda d: d["entries"][0].update(region="cn"), "entries.0.region"),
        (lambda d: d["entries"][0].update(extra=1), "entries.0.extra"),
        (lambda d: d["entries"][0].update(checked="soon"), "checked"),
        (lambda d: d["entries"][0].pop("checked"), "entries.0.checked"),
        (lambda d: d["entries"][0].pop("source"), "entries.0.source"),
        (lambda d: d["entries"][0].update(source=""), "entries.0.source"),
        (lambda d: d["entries"][0].update(review_days=0), "entries.0.review_days"),
        (lambda d: d["entries"][0].update(source_kind="news"), "entries.0.source_kind: Input"),
    ],
)
def test_a_broken_registry_is_refused_naming_the_problem(
    tmp_path: Path, change: Any, problem: str
) -> None:
    data = packaged()
    change(data)
    with pytest.raises(ConfigError, match=problem):
        load_registry(write(tmp_path, data))


def test_an_unreadable_registry_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="resource registry"):
        load_registry(write(tmp_path, "{not json"))
    with pytest.raises(ConfigError):
        load_registry(tmp_path / "missing.json")


def test_a_custom_registry_changes_what_is_verified(tmp_path: Path) -> None:
    data = packaged()
    data["entries"][0]["numbers"] = ["400-161-9995"]
    custom = load_registry(write(tmp_path, data))
    region = data["entries"][0]["region"]
    assert unverified_numbers("拨打 400-161-9995", region=region, registry=custom) == ()
    assert unverified_numbers("拨打 400-161-9995", region=region) != ()


def test_an_entry_that_does_not_say_its_source_is_official_counts_as_secondary(
    tmp_path: Path,
) -> None:
    data = packaged()
    official = next(e for e in data["entries"] if e["source_kind"] == "official")
    official.pop("source_kind")
    registry = load_registry(write(tmp_path, data))
    assert official["id"] in {entry.id for entry in secondary_entries(registry)}


def test_entries_checked_against_a_secondary_source_are_listed_not_hidden(
    tmp_path: Path,
) -> None:
    news = resource_entry(id="jp-news-line", numbers=["0120-000-000"], source_kind="secondary")
    path = write(
        tmp_path,
        {"regions": {"JP": REGISTRY.regions["JP"]}, "entries": [resource_entry(), news]},
    )
    registry = registry_from_file(path, extend=False)
    [listed] = secondary_entries(registry)
    assert listed.id == "jp-news-line" and listed.source_kind is SourceKind.SECONDARY
    # The line is still shown: a secondary source asks for confirmation, not removal.
    text = render_resources(Locale.EN, "JP", registry)
    assert "0120-000-000" in text and "0570-000-111" in text


JP_EXTRA = resource_entry(id="jp-inochi-test")
PT = {"en": "Portugal", "zh-Hans": "葡萄牙", "zh-Hant": "葡萄牙"}


def test_extend_adds_regions_and_entries_and_replaces_by_id(tmp_path: Path) -> None:
    pt = {**JP_EXTRA, "id": "pt-test", "region": "PT", "numbers": ["213 544 545"]}
    hk = {**REGISTRY.entries_for("HK")[0].model_dump(mode="json"), "numbers": ["2389 2223"]}
    path = write(tmp_path, {"regions": {"PT": PT}, "entries": [JP_EXTRA, pt, hk]})
    extended = registry_from_file(path, extend=True)
    assert len(extended.entries) == len(REGISTRY.entries) + 2
    assert "0570-000-111" in render_resources(Locale.EN, "JP", extended)
    assert "0120-279-338" in render_resources(Locale.EN, "JP", extended)
    assert "213 544 545" in render_resources(Locale.EN, "PT", extended)
    hk_text = render_resources(Locale.EN, "HK", extended)
    assert "2389 2223" in hk_text and "2389 2222" not in hk_text
    assert unverified_numbers("call 2389 2222", region="HK", registry=extended) != ()


def test_replace_makes_the_file_the_whole_registry(tmp_path: Path) -> None:
    path = write(tmp_path, {"regions": {"JP": REGISTRY.regions["JP"]}, "entries": [JP_EXTRA]})
    replaced = registry_from_file(path, extend=False)
    assert [e.id for e in replaced.entries] == ["jp-inochi-test"]
    assert UNKNOWN_NOTICE[Locale.EN] in render_resources(Locale.EN, "US", replaced)
    assert unverified_numbers("call 988", region="US", registry=replaced) != ()
    assert registry_from_file(None, extend=True) is REGISTRY


@pytest.mark.parametrize("extend", [True, False])
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "No such file"),
        ("{not json", "resource registry"),
        ({"entries": [{**JP_EXTRA, "source": None}]}, "source"),
        ({"entries": [{k: v for k, v in JP_EXTRA.items() if k != "checked"}]}, "checked"),
    ],
)
def test_a_bad_resources_file_is_a_config_error(
    tmp_path: Path, extend: bool, content: Any, problem: str
) -> None:
    path = tmp_path / "missing.json" if content is None else write(tmp_path, content)
    if not extend and isinstance(content, dict):
        content["regions"] = {"JP": REGISTRY.regions["JP"]}
        path = write(tmp_path, content)
    with pytest.raises(ConfigError, match=problem):
        registry_from_file(path, extend=extend)


# --- property: separators, invisible marks and numerals never hide a number -----------------

_JOINERS = [
    " ", "\t", "\n", "\r\n", "\u00a0", "\u2002", "\u2007", "\u2009", "\u200a", "\u202f",
    "\u3000", "\u2028", "-", "\u2010", "\u2013", "\u2212", "·", "・",
]  # fmt: skip
_INVISIBLE = [
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u202e", "\u2066",
    "\u2069", "\U000e0041", "\u0301", "\u0336", "\u20e3", "\ufe0f", "\u3164", "\u2800",
]  # fmt: skip
_DIGIT_FORMS = {d: (d, chr(0xFF10 + int(d)), "〇一二三四五六七八九"[int(d)]) for d in "0123456789"}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text("0123456789", min_size=1, max_size=4), min_size=2, max_size=4).filter(
        lambda groups: len("".join(groups)) >= 7
    ),
    st.sampled_from(["", " ", "-"]),
    st.data(),
)
def test_a_number_found_in_plain_text_is_found_disguised(
    groups: list[str], joiner: str, data: st.DataObject
) -> None:
    number = joiner.join(groups)
    [plain] = find_phone_numbers(f"see {number} now")
    pieces = []
    for i, char in enumerate(number):
        if i:
            gap = data.draw(st.lists(st.sampled_from(_JOINERS + _INVISIBLE), max_size=3))
            pieces.append("".join(gap))
        pieces.append(data.draw(st.sampled_from(_DIGIT_FORMS.get(char, (char,)))))
    disguised = "".join(pieces)
    text = f"see {disguised} now"
    [mention] = find_phone_numbers(text)
    # The span is in the text and covers the whole disguised number, insertions included.
    assert (mention.start, mention.end) == (4, 4 + len(disguised))
    assert mention.text == disguised and mention.digits == plain.digits


def test_a_region_whose_crisis_lines_all_close_says_what_to_do_when_they_do() -> None:
    # Malaysia's one line answers from 8 am to midnight; Hong Kong's answer at all hours.
    notes = {Locale.EN: "not open at every hour", Locale.ZH_HANS: "并非全天开放"}
    notes[Locale.ZH_HANT] = "並非全天開放"
    for locale, note in notes.items():
        assert note in render_resources(locale, "MY")
        assert note not in render_resources(locale, "HK")


def test_every_packaged_entry_says_whether_it_is_always_open_as_its_hours_do() -> None:
    for entry in REGISTRY.entries:
        assert entry.always_open is entry.hours[Locale.EN].startswith("24 hours"), entry.id


@pytest.mark.parametrize(
    ("region", "number"),
    [
        ("HK", "2896 0000"),
        ("HK", "18111"),
        ("JP", "0570-783-556"),
        ("BR", "188"),
        ("MO", "6330 2692"),
    ],
)
def test_the_lines_issue_35_names_are_in_the_registry(region: str, number: str) -> None:
    assert number in render_resources(Locale.EN, region)
    assert unverified_numbers(f"call {number}", region=region) == ()


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("Ligue para 4141, eles atendem", "4141"),  # Portuguese
        ("Llama al 4141 ahora mismo", "4141"),  # Spanish
        ("Appelez le 4141 ce soir", "4141"),  # French
        ("Bitte ruf 4141 an", "4141"),  # German
        ("Hubungi 4141 sekarang", "4141"),  # Indonesian
        ("今すぐ4141に電話してください", "4141"),  # Japanese
        ("You can reach them at 4141.", "4141"),  # no verb of calling at all
        ("Hope Line:\n4141\n", "4141"),  # alone on its line
        ("call one eight hundred five five five zero one nine nine", "18005550199"),
        ("text eight eight eight to them", "888"),
        ("dial double four one two", "4412"),
        ("请拨打幺二三四五", "12345"),
    ],
)
def test_a_number_presented_as_one_to_reach_is_found_in_any_phrasing(
    text: str, digits: str
) -> None:
    assert [m.digits for m in unverified_numbers(text, region="US")] == [digits]
    spans = [text[m.start : m.end] for m in find_phone_numbers(text)]
    assert spans and all(span.strip() for span in spans)


@pytest.mark.parametrize(
    "text",
    [
        "I slept 8 hours and walked 100 steps in 2023.",
        "I have one or two ideas for tomorrow.",
        "one two three, here we go",
        "The 988 Lifeline answers all day.",  # a listed number, not a fabricated one
        "It is 2024 and you have come a long way.",
    ],
)
def test_ordinary_numbers_and_listed_lines_are_not_fabrications(text: str) -> None:
    assert unverified_numbers(text, region="US") == ()


def test_the_served_regions_are_those_with_an_entry_each_once_by_code(tmp_path: Path) -> None:
    served = REGISTRY.served_regions()
    assert served == tuple(sorted({e.region for e in REGISTRY.entries}))
    assert {"CN", "HK", "TW", "US", "GB"} <= set(served) and len(set(served)) == len(served)
    # A region named but with no entry is not served: its users get the region-less text.
    path = write(
        tmp_path, {"regions": {"JP": REGISTRY.regions["JP"], "PT": PT}, "entries": [JP_EXTRA]}
    )
    only_jp = registry_from_file(path, extend=False)
    assert only_jp.served_regions() == ("JP",)
    assert resources_for(Locale.EN, "PT", only_jp) == ()
    pt = {**JP_EXTRA, "id": "pt-test", "region": "PT", "numbers": ["213 544 545"]}
    extended = registry_from_file(
        write(tmp_path, {"regions": {"PT": PT}, "entries": [pt]}), extend=True
    )
    assert extended.served_regions() == tuple(sorted({*served, "PT"}))


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from([e.id for e in REGISTRY.entries]), min_size=1))
def test_a_region_is_served_exactly_when_a_user_of_it_is_shown_a_line(ids: set[str]) -> None:
    kept = [e for e in REGISTRY.entries if e.id in ids]
    registry = type(REGISTRY)(regions=REGISTRY.regions, entries=tuple(kept))
    served = registry.served_regions()
    assert list(served) == sorted(set(served))
    for region in REGISTRY.regions:
        shown = resources_for(Locale.EN, region, registry)
        assert (region in served) == bool(shown)
        if region not in served:  # the region-less guidance, no number of another region
            assert find_phone_numbers(render_resources(Locale.EN, region, registry)) == ()
