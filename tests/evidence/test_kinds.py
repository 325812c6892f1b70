from pathlib import Path

import pytest
from pydantic import ValidationError

from foureyes.core.errors import ConfigError
from foureyes.core.locale import Locale
from foureyes.evidence import KindRegistry, ObservationKind, Template
from tests.evidence._support import KINDS_FILE

LABELS = {"zh-Hans": "运动记录", "zh-Hant": "運動記錄", "en": "Exercise record"}
TEMPLATES = {
    "zh-Hans": "来源记录：{value}。",
    "zh-Hant": "來源記錄：{value}。",
    "en": "Source: {value}.",
}

PINNED = """
[kinds.exercise_pattern]
sources = ["lifestyle.exercise"]
label = {zh-Hans = "运动记录", zh-Hant = "運動記錄", en = "Exercise record"}
template = {zh-Hans = "来源记录：{value}。", zh-Hant = "來源記錄：{value}。", \
en = "Source record: {value}."}
"""


def test_the_pinned_toml_form_loads() -> None:
    registry = KindRegistry.from_toml(PINNED)
    kind = registry.get("exercise_pattern")
    assert kind is not None and kind.may_cite("lifestyle.exercise")
    assert not kind.may_cite("lifestyle.sleep")
    assert kind.label[Locale.ZH_HANS] == "运动记录"
    assert kind.template_for(Locale.EN).slots == ("value",)


def test_the_example_has_the_four_body_state_kinds() -> None:
    registry = KindRegistry.from_file(KINDS_FILE)
    assert registry.names == (
        "exercise_pattern",
        "lifestyle_habit",
        "posture_finding",
        "report_indicator",
    )
    assert [k.name for k in registry.citing("lifestyle.sleep")] == ["lifestyle_habit"]
    assert registry.citing("user.note") == ()
    assert len(registry) == 4


def test_the_digest_is_stable_and_follows_content() -> None:
    one, two = KindRegistry.from_toml(PINNED), KindRegistry.from_toml(PINNED)
    assert one.sha256 == two.sha256
    changed = KindRegistry.from_toml(PINNED.replace("Source record", "Record"))
    assert changed.sha256 != one.sha256


def test_kinds_build_in_python_with_sorted_sources() -> None:
    kind = ObservationKind(
        name="habit", sources=("b.x", "a.x", "a.x"), label=LABELS, template=TEMPLATES
    )
    assert kind.sources == ("a.x", "b.x")
    assert KindRegistry([kind]).names == ("habit",)


@pytest.mark.parametrize(
    "template",
    [
        "{value!r}",
        "{value:>10}",
        "{}",
        "{0}",
        "{value.attr}",
        "{value[0]}",
        "{value",
        "}",
        " ",
        "Training volume is too low.",
        "{{value}} is literal text, no slot",
        "{{x}} {value}",
        "a } {value}",
        "{value} {",
        "{value}}",
    ],
)
def test_templates_allow_only_plain_named_slots(template: str) -> None:
    with pytest.raises(ValueError):
        Template.parse(template)


def test_text_around_slots_is_literal() -> None:
    template = Template.parse("[x] {value}: {a}.")
    assert template.slots == ("value", "a")
    assert "".join(literal for literal, _ in template.parts) == "[x] : ."


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        (PINNED.replace(', en = "Exercise record"', ""), "label lacks locale en"),
        (PINNED.replace('en = "Source record: {value}."', 'en = "{value!s}"'), "template.en"),
        (PINNED.replace('sources = ["lifestyle.exercise"]', "sources = []"), "sources"),
        (PINNED.replace('["lifestyle.exercise"]', '["Lifestyle"]'), "sources"),
        (PINNED + 'severity = "high"\n', "unknown key"),
        (PINNED.replace("exercise_pattern", "Exercise"), "kinds.Exercise.name"),
        ("[other]\nx = 1\n", "unknown key"),
        ("kinds = {}", "kinds"),
        ("[kinds]\nx = 1\n", "kinds.x must be a table"),
        ("not = toml = at all", "not valid TOML"),
        (
            PINNED.replace('en = "Source record: {value}."', 'en = "Training is too low."'),
            "kinds.exercise_pattern.template.en: template 'Training is too low.' has no {slot}",
        ),
    ],
)
def test_bad_kinds_are_config_errors_naming_the_key(toml: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        KindRegistry.from_toml(toml, where="k.toml")
    assert any(fragment in p for p in caught.value.problems), caught.value.problems


def test_registry_refuses_repeats_and_emptiness() -> None:
    kind = ObservationKind(name="a", sources=("x.y",), label=LABELS, template=TEMPLATES)
    with pytest.raises(ConfigError, match="more than once"):
        KindRegistry([kind, kind])
    with pytest.raises(ConfigError, match="at least one"):
        KindRegistry([])


def test_a_blank_label_is_refused() -> None:
    with pytest.raises(ValidationError, match="blank"):
        ObservationKind(name="a", sources=("x.y",), label=LABELS | {"en": "  "}, template=TEMPLATES)


def test_missing_and_unreadable_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        KindRegistry.from_file(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="cannot be read"):
        KindRegistry.from_file(bad)
