from typing import Any

import pytest

from foureyes.core.locale import Locale
from foureyes.evidence import (
    RENDERER_VERSION,
    EvidenceItem,
    KindRegistry,
    Observation,
    Template,
    render,
    render_template,
    slot_text,
)


def _item(value: Any, **fields: Any) -> EvidenceItem:
    return EvidenceItem.model_validate(
        {
            "ref": "r",
            "kind": "lifestyle.exercise",
            "value": value,
            "source": "questionnaire",
            "admissible": True,
            "observed_at": "2026-03-10",
        }
        | fields
    )


def test_the_seed_sentence_is_rendered_byte_for_byte(catalog: Any, kinds: KindRegistry) -> None:
    item, kind = catalog.get("ex-1"), kinds.get("exercise_pattern")
    assert item is not None and kind is not None
    observation = render(item, kind, Locale.ZH_HANS)
    assert observation == Observation(
        kind="exercise_pattern",
        evidence_ref="ex-1",
        label="运动记录",
        description="来源记录：健身；频率：1-2。",
    )
    assert render(item, kind, Locale.EN) == Observation(
        kind="exercise_pattern",
        evidence_ref="ex-1",
        label="Exercise record",
        description="Source record: 健身; frequency: 1-2.",
    )
    assert render(item, kind, Locale.ZH_HANT).description == "來源記錄：健身；頻率：1-2。"  # type: ignore[union-attr]


def test_rendering_is_deterministic(catalog: Any, kinds: KindRegistry) -> None:
    for item in catalog.items:
        for kind in kinds.citing(item.kind):
            for locale in Locale:
                first = render(item, kind, locale)
                again = render(EvidenceItem.model_validate(item.model_dump()), kind, locale)
                assert first == again
                if first is not None:
                    assert first.description.encode() == again.description.encode()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("value", "slot", "text"),
    [
        ("健身", "value", "健身"),
        ({"n": 3}, "n", "3"),
        ({"n": -12}, "n", "-12"),
        ({"x": 5.4}, "x", "5.4"),
        ({"x": 0.1}, "x", "0.1"),
        ({"x": 1e16}, "x", "1e+16"),
        ({"x": "a"}, "source", "questionnaire"),
        ({"x": "a"}, "observed_at", "2026-03-10"),
        ({"source": "shadowed"}, "source", "questionnaire"),
    ],
)
def test_slots_take_scalars_written_one_way(value: Any, slot: str, text: str) -> None:
    assert slot_text(_item(value), slot) == text


@pytest.mark.parametrize(
    ("value", "slot"),
    [
        ({"x": "a"}, "value"),
        ("text", "x"),
        ({"x": "a"}, "y"),
        ({"x": True}, "x"),
        ({"x": None}, "x"),
        ({"x": [1]}, "x"),
        ({"x": {"y": 1}}, "x"),
        ({"x": "   "}, "x"),
        ("  ", "value"),
    ],
)
def test_a_slot_that_cannot_be_filled_makes_the_record_unrenderable(value: Any, slot: str) -> None:
    assert slot_text(_item(value), slot) is None
    assert render_template(Template.parse("before {" + slot + "} after"), _item(value)) is None


def test_template_text_around_slots_is_kept_verbatim() -> None:
    template = Template.parse("[a] {x}/{x} <{y}>")
    assert render_template(template, _item({"x": "1", "y": "<b>"})) == "[a] 1/1 <<b>>"


def test_the_renderer_has_a_version() -> None:
    assert RENDERER_VERSION == "2"
