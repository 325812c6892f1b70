"""The console's page and assets as served: HTML, headers, locales, escaping, catalogue."""

from __future__ import annotations

import json
import re
from html import escape as html_escape
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.config import Config, GateConfig, RiskConfig, StoreConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.gate import Outcome
from foureyes.gate.verdict import VerdictDecision
from foureyes.pipeline.floor import PolicyFloor
from foureyes.risk import (
    AlertBlock,
    AlertStatus,
    ConfirmationCheck,
    L0Category,
    RiskLevel,
    RiskStatus,
    SuppressReason,
    Tier,
)
from foureyes.risk.resources import default_registry
from foureyes.server.app import GATEWAY_MODEL, create_app
from foureyes.server.console import (
    CONSOLE_CSP,
    LEVEL_FILTERS,
    PURPOSE_FILTERS,
    Catalogue,
    PageAssets,
    console_strings,
    json_for_script,
    page_locale,
    render_page,
)
from tests.helpers.resources import resource_entry
from tests.helpers.server import app_client
from tests.server._support import KEYS_ENV, config, keyed

CONSOLE = resources.files("foureyes.server.console")
SCRIPT = CONSOLE.joinpath("static", "console.js").read_text(encoding="utf-8")
TEMPLATE = CONSOLE.joinpath("templates", "console.html").read_text(encoding="utf-8")
HOSTILE = "</script><img src=x onerror=alert(1)><script>alert(2)</script>&amp;"
ASSETS = PageAssets(css_href="/c.css", js_href="/c.js", console_path="/console")


class _Page(HTMLParser):
    """The parts of a page the tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data_blocks: list[str] = []
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        self._in_data = tag == "script" and attributes.get("type") == "application/json"

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data_blocks.append(data)

    def config(self) -> dict[str, Any]:
        [block] = self.data_blocks
        data: dict[str, Any] = json.loads(block)
        return data


def parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


async def get_page(path: str = "/console", **headers: str) -> tuple[Any, _Page]:
    async with app_client(create_app(config(), {})) as client:
        response = await client.get(path, headers=headers)
    return response, parse(response.text)


# --- the page as served ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/console", "/console/"])
async def test_the_page_is_html_under_a_strict_csp(path: str) -> None:
    response, page = await get_page(path)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CONSOLE_CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"
    policy = dict(p.strip().split(" ", 1) for p in CONSOLE_CSP.split(";"))
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert "unsafe" not in CONSOLE_CSP
    assert page.config()["model"] == GATEWAY_MODEL


async def test_the_page_has_no_inline_script_handler_or_style() -> None:
    _, page = await get_page()

    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert {attrs.get("type") for attrs in scripts if "src" not in attrs} == {"application/json"}
    assert all(str(a["src"]).startswith("/console/static/") for a in scripts if "src" in a)
    for tag, attrs in page.tags:
        assert "style" not in attrs, tag
        assert not [name for name in attrs if name.startswith("on")], tag


async def test_every_field_has_a_label_and_the_page_has_headings() -> None:
    _, page = await get_page()

    labelled = {attrs["for"] for tag, attrs in page.tags if tag == "label"}
    fields = [
        attrs["id"]
        for tag, attrs in page.tags
        if tag in ("input", "select", "textarea") and attrs.get("type") != "hidden"
    ]
    assert fields and set(fields) <= labelled
    headings = [tag for tag, _ in page.tags if re.fullmatch(r"h[1-6]", tag)]
    assert headings[0] == "h1" and headings.count("h1") == 1 and "h2" in headings


async def test_assets_are_served_under_the_csp_and_versioned_by_content() -> None:
    async with app_client(create_app(config(), {})) as client:
        page = parse((await client.get("/console")).text)
        links = [
            a["href"] for tag, a in page.tags if tag == "link" and a.get("rel") == "stylesheet"
        ]
        srcs = [a["src"] for tag, a in page.tags if tag == "script" and "src" in a]
        for url, media_type, name in (
            (links[0], "text/css", "console.css"),
            (srcs[0], "text/javascript", "console.js"),
        ):
            assert url is not None
            response = await client.get(url)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith(media_type)
            assert response.headers["content-security-policy"] == CONSOLE_CSP
            body = CONSOLE.joinpath("static", name).read_bytes()
            assert response.content == body
            assert url.endswith(f"?v={sha256_hex(body)[:16]}")


@pytest.mark.parametrize(
    "path", ["/console/static/missing.js", "/console/static/..%2Fpage.py", "/console/static/"]
)
async def test_anything_else_under_static_is_a_json_404(path: str) -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_the_page_needs_no_key_because_it_holds_no_data() -> None:
    # A browser cannot send a bearer token when it navigates; the data calls need one.
    async with app_client(create_app(keyed(), KEYS_ENV), client_host="203.0.113.9") as client:
        page = await client.get("/console")
        data = await client.get("/v1/keys")
    assert page.status_code == 200
    assert data.status_code == 401
    assert KEYS_ENV["ADMIN_KEYS"] not in page.text


async def test_rules_of_the_deployment_travel_with_the_page_in_its_locale() -> None:
    texts = {Locale.EN: "No pets.", Locale.ZH_HANS: "不谈宠物。", Locale.ZH_HANT: "不談寵物。"}
    cfg = Config(
        store=StoreConfig(url=config().store.url), gate=GateConfig(extra_rules={"no_pets": texts})
    )
    async with app_client(create_app(cfg, {})) as client:
        response = await client.get("/console?lang=zh-Hans")
    rules = parse(response.text).config()["rules"]
    assert rules["no_pets"] == "不谈宠物。"
    assert rules["diagnosis_claim"] == "对用户作出诊断，或断言用户患有某种心理疾病。"


# --- the chat's region menu ------------------------------------------------------------


class _Menu(HTMLParser):
    """The options (value, label) of one ``<select>``."""

    def __init__(self, select_id: str) -> None:
        super().__init__()
        self.select_id = select_id
        self.options: list[tuple[str, str]] = []
        self._inside = False
        self._value: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "select":
            self._inside = attributes.get("id") == self.select_id
        elif tag == "option" and self._inside:
            self._value = attributes.get("value") or ""
            self.options.append((self._value, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._inside = False
        self._value = None

    def handle_data(self, data: str) -> None:
        if self._value is not None:
            value, text = self.options[-1]
            self.options[-1] = (value, text + data)


def menu(html: str, select_id: str = "region-select") -> list[tuple[str, str]]:
    parser = _Menu(select_id)
    parser.feed(html)
    parser.close()
    return parser.options


async def test_the_region_menu_lists_exactly_the_regions_the_registry_serves() -> None:
    registry = default_registry()
    response, page = await get_page("/console?lang=zh-Hans")

    options = menu(response.text)
    assert [value for value, _ in options] == ["", *registry.served_regions()]
    assert options[0][1] == "不设置：危机回复不提供电话号码"  # no gate.region: no number
    assert ("CN", "中国大陆 (CN)") in options and ("HK", "香港 (HK)") in options
    assert page.config()["regions"] == list(registry.served_regions())
    hint = console_strings().text("chat.region_hint", Locale.ZH_HANS)
    assert html_escape(hint) in response.text


@pytest.mark.parametrize("mode", ["extend", "replace"])
async def test_the_region_menu_follows_the_configured_registry(tmp_path: Path, mode: str) -> None:
    portugal = {"en": "Portugal", "zh-Hans": "葡萄牙", "zh-Hant": "葡萄牙"}
    line = resource_entry(id="pt-test", region="PT", numbers=["213 544 545"])
    # Japan is named but has no entry in the file: it is served only through the packaged one.
    names = {"PT": portugal, "JP": default_registry().regions["JP"]}
    path = tmp_path / "resources.json"
    path.write_text(json.dumps({"regions": names, "entries": [line]}), encoding="utf-8")
    risk = RiskConfig(resources_file=path, resources_mode=mode)
    cfg = Config(store=StoreConfig(url=config().store.url), risk=risk)
    async with app_client(create_app(cfg, {})) as client:
        response = await client.get("/console?lang=en")

    codes = [value for value, _ in menu(response.text)]
    if mode == "replace":
        assert codes == ["", "PT"]
    else:
        assert codes == ["", *sorted({*default_registry().served_regions(), "PT"})]
    assert ("PT", "Portugal (PT)") in menu(response.text)


@pytest.mark.parametrize(
    ("region", "label"),
    [
        ("CN", "The service's default: mainland China (CN)"),
        # A configured region the registry has no line for is still named, by its code.
        ("NL", "The service's default: NL"),
    ],
)
async def test_the_region_menu_s_first_choice_names_the_service_s_region(
    region: str, label: str
) -> None:
    cfg = Config(store=StoreConfig(url=config().store.url), gate=GateConfig(region=region))
    async with app_client(create_app(cfg, {})) as client:
        response = await client.get("/console?lang=en")

    options = menu(response.text)
    assert options[0] == ("", label)
    assert "NL" not in [value for value, _ in options]


def test_hostile_region_names_are_escaped() -> None:
    regions = [("CN", HOSTILE)]
    html = render_page(
        console_strings(), Locale.EN, model="m", rules={}, assets=ASSETS, regions=regions
    )
    page = parse(html)
    assert not [tag for tag, _ in page.tags if tag == "img"]
    assert menu(html)[1] == ("CN", f"{HOSTILE} (CN)")


# --- locales ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "accept", "locale"),
    [
        ("", "", Locale.EN),
        ("", "zh-CN,zh;q=0.9", Locale.ZH_HANS),
        ("", "zh-TW", Locale.ZH_HANT),
        ("", "fr-FR, zh-HK;q=0.5", Locale.ZH_HANT),
        ("?lang=zh-Hant", "en", Locale.ZH_HANT),
        ("?lang=ZH-HANS", "en", Locale.ZH_HANS),
        ("?lang=en", "zh-CN", Locale.EN),
        ("?lang=klingon", "zh-TW", Locale.ZH_HANT),
    ],
)
async def test_the_language_is_the_query_s_then_the_header_s(
    query: str, accept: str, locale: Locale
) -> None:
    response, page = await get_page(f"/console{query}", **{"accept-language": accept})

    html = next(attrs for tag, attrs in page.tags if tag == "html")
    assert html["lang"] == locale.value
    catalogue = console_strings()
    assert f"<title>{catalogue.text('app.title', locale)}</title>" in response.text
    assert catalogue.text("chat.send", locale) in response.text
    data = page.config()
    assert data["lang"] == locale.value and data["strings"] == catalogue.strings(locale)
    selected = [a["value"] for t, a in page.tags if t == "option" and "selected" in a]
    assert selected[0] == locale.value
    assert response.headers["vary"] == "Accept-Language"


def test_page_locale_accepts_our_three_tags_only() -> None:
    assert page_locale(" zh-hant ", None) is Locale.ZH_HANT
    assert page_locale("zh-TW", "en") is Locale.EN  # a region tag is not one of ours
    assert page_locale(None, "zh-SG") is Locale.ZH_HANS
    assert page_locale("", None) is Locale.EN


async def test_a_hostile_lang_parameter_is_not_reflected() -> None:
    response, page = await get_page("/console?lang=" + HOSTILE)

    assert "<img" not in response.text and "alert(" not in response.text
    assert page.config()["lang"] == "en"


# --- escaping -----------------------------------------------------------------------


def hostile_catalogue() -> Catalogue:
    packaged = console_strings().entries
    return Catalogue.from_json(
        {key: {loc.value: f"{key} {HOSTILE}" for loc in Locale} for key in packaged}
    )


def test_hostile_strings_are_escaped_in_markup_and_in_the_data_block() -> None:
    catalogue = hostile_catalogue()
    rules = {"rule": HOSTILE}
    html = render_page(catalogue, Locale.EN, model=HOSTILE, rules=rules, assets=ASSETS)
    page = parse(html)

    assert not [tag for tag, _ in page.tags if tag == "img"]
    assert [tag for tag, _ in page.tags].count("script") == 2  # the data block and the script
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    data = page.config()
    assert data["strings"] == catalogue.strings(Locale.EN)
    assert data["rules"] == rules and data["model"] == HOSTILE


@given(st.recursive(st.text() | st.none() | st.booleans() | st.integers(), st.lists))
def test_json_for_script_never_holds_markup_and_reads_back_the_same(value: Any) -> None:
    text = json_for_script({"value": value})
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == {"value": value}


def test_the_script_never_builds_markup_from_strings() -> None:
    # Text reaches the DOM through textContent / text nodes only (see console.js).
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "createContextualFragment",
        "DOMParser",
        'setAttribute("style"',
        "localStorage",
    ):
        assert sink not in SCRIPT, sink


# --- the catalogue ------------------------------------------------------------------

FAMILIES: dict[str, list[str]] = {
    "reason": [r.value for r in ReasonCode],
    "reasonname": [r.value for r in ReasonCode],
    "stage": ["draft", "review", "l1", "l2", "select", "explain"],
    "kind": ["support_message", "gate_reply", "risk_triage", "review", "facts"],
    "purpose": list(PURPOSE_FILTERS),
    "outcome": [o.value for o in Outcome],
    "level": [level.value for level in RiskLevel] + ["unknown", "unscreened"],
    "status": [s.value for s in RiskStatus],
    "tier": [t.value for t in Tier],
    "category": [c.value for c in L0Category],
    "check": [c.value for c in ConfirmationCheck],
    "suppress": [s.value for s in SuppressReason],
    "policy": [p.value for p in GenerationPolicy],
    "role": [r.value for r in Role],
    "verdict": [v.value for v in VerdictDecision],
    "flag": ["fiction", "quote", "third_party", "joke"],
    "floor": [f.value for f in PolicyFloor],
    "alert": [a.value for a in AlertStatus] + ["pending"],
    "alertblock": [b.value for b in AlertBlock],
}


def test_the_catalogue_labels_every_value_of_every_closed_set() -> None:
    catalogue = console_strings()
    for family, values in FAMILIES.items():
        for value in values:
            for locale in Locale:
                assert catalogue.text(f"{family}.{value}", locale).strip()
    assert set(LEVEL_FILTERS) <= set(FAMILIES["level"])


def test_every_string_the_page_uses_exists_and_every_string_is_used() -> None:
    catalogue = console_strings()
    in_template = set(re.findall(r"\{\{t:([\w.-]+)\}\}", TEMPLATE))
    in_script = set(re.findall(r"""\bt\(["']([\w.-]+)["']\)""", SCRIPT))
    in_script |= {
        f"{family}.{value}"
        for family in re.findall(r"""\b(?:label|chips|coded)\(["'](\w+)["']""", SCRIPT)
        for value in FAMILIES.get(family, [])
    }
    in_page_code = {f"level.{level}" for level in LEVEL_FILTERS} | {"traces.any"}
    in_page_code |= {f"purpose.{purpose}" for purpose in PURPOSE_FILTERS}
    in_page_code |= {f"reasonname.{reason.value}" for reason in ReasonCode}
    in_page_code |= {"chat.region_none", "chat.region_default"}  # the region menu's first choice
    used = in_template | in_script | in_page_code
    assert used - set(catalogue.entries) == set()
    assert set(catalogue.entries) - used == set()


def test_the_packaged_catalogue_file_parses_with_no_duplicate_keys() -> None:
    raw = CONSOLE.joinpath("strings.json").read_text(encoding="utf-8")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
        return dict(pairs)

    json.loads(raw, object_pairs_hook=no_duplicates)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "must be a JSON object"),
        ({"a": "text"}, "a: not an object of texts"),
        ({"a": {"en": "x", "zh-Hans": "y"}}, "a: no text for zh-Hant"),
        ({"a": {"en": "x", "zh-Hans": "y", "zh-Hant": "z", "fr": "w"}}, "a: unknown locale fr"),
        ({"a": {"en": " ", "zh-Hans": "y", "zh-Hant": "z"}}, "a: every text must be a non-empty"),
        ({"a": {"en": 1, "zh-Hans": "y", "zh-Hant": "z"}}, "a: every text must be a non-empty"),
    ],
)
def test_a_broken_catalogue_is_refused_naming_the_problem(data: Any, problem: str) -> None:
    with pytest.raises(UsageError, match=re.escape(problem)):
        Catalogue.from_json(data)


def test_an_unknown_string_or_slot_is_a_usage_error() -> None:
    catalogue = console_strings()
    with pytest.raises(UsageError, match="no string 'nope'"):
        catalogue.text("nope", Locale.EN)
    small = Catalogue.from_json({"x": {loc.value: "x" for loc in Locale}})
    with pytest.raises(UsageError, match="no string"):
        render_page(small, Locale.EN, model="m", rules={}, assets=ASSETS)
