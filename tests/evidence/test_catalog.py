import json
from typing import Any

import pytest

from foureyes.evidence import (
    Catalog,
    CatalogError,
    EvidenceItem,
    catalog_from_json,
    catalog_from_mapping,
)
from tests.evidence._support import example_document


def _item(ref: str = "r1", **changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "ref": ref,
        "kind": "lifestyle.exercise",
        "value": {"activity": "健身", "frequency": "1-2"},
        "source": "questionnaire",
        "admissible": True,
        "observed_at": "2026-03-10",
    }
    return item | changes


def _doc(*items: dict[str, Any], snapshot_id: str = "s1") -> dict[str, Any]:
    return {"snapshot_id": snapshot_id, "items": list(items)}


def test_the_example_parses_with_every_record_by_ref() -> None:
    catalog = catalog_from_mapping(example_document())
    assert catalog.snapshot_id == "body-state/u-1001/2026-03-14"
    assert [i.ref for i in catalog.items] == sorted(i["ref"] for i in example_document()["items"])
    lab = catalog.get("lab-2")
    assert lab is not None and lab.admissible is False
    assert "lab-2" not in {i.ref for i in catalog.admissible}
    assert catalog.get("missing") is None


def test_the_digest_ignores_record_order_but_not_content() -> None:
    first, second = _item("a"), _item("b", value="x")
    one = catalog_from_mapping(_doc(first, second))
    other = catalog_from_mapping(_doc(second, first))
    assert one.sha256 == other.sha256
    assert len(one.sha256) == 64
    changed = catalog_from_mapping(_doc(first, _item("b", value="y")))
    assert changed.sha256 != one.sha256
    inadmissible = catalog_from_mapping(_doc(first, _item("b", value="x", admissible=False)))
    assert inadmissible.sha256 != one.sha256
    renamed = catalog_from_mapping(_doc(first, second, snapshot_id="s2"))
    assert renamed.sha256 != one.sha256


def test_the_pinned_json_form_round_trips() -> None:
    catalog = catalog_from_mapping(example_document())
    again = catalog_from_json(json.dumps(catalog.to_json(), ensure_ascii=False))
    assert again == catalog and again.sha256 == catalog.sha256


def test_item_digest_names_the_record() -> None:
    item = EvidenceItem.model_validate(_item())
    assert item.sha256 != EvidenceItem.model_validate(_item(source="other")).sha256


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (_doc(_item(admissible="true")), "items.0.admissible"),
        (_doc(_item(extra="x")), "unknown key 'items.0.extra'"),
        (_doc(_item(kind="Lifestyle Exercise")), "items.0.kind"),
        (_doc(_item(observed_at="last tuesday")), "not an ISO 8601 time"),
        (_doc(_item(ref="")), "items.0.ref"),
        (_doc(_item(value=5)), "items.0.value"),
        (_doc(_item(), _item()), "ref 'r1' appears more than once"),
        (_doc(_item(), snapshot_id=""), "snapshot_id"),
        ({"items": []}, "snapshot_id"),
        ({"snapshot_id": "s", "items": [], "owner": "x"}, "unknown key 'owner'"),
        ({"snapshot_id": "s", "items": [], "subject": ""}, "subject"),
        ([], "catalog"),
    ],
)
def test_malformed_catalogs_are_refused_naming_the_field(document: Any, fragment: str) -> None:
    with pytest.raises(CatalogError) as caught:
        catalog_from_mapping(document)
    assert any(fragment in problem for problem in caught.value.problems), caught.value.problems


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "not valid JSON"),
        ('{"snapshot_id": "a", "snapshot_id": "b", "items": []}', "duplicate key"),
        ('{"snapshot_id": "a", "items": [{"value": NaN}]}', "NaN is not JSON"),
    ],
)
def test_bad_json_is_refused(text: str, fragment: str) -> None:
    with pytest.raises(CatalogError, match=fragment):
        catalog_from_json(text, where="f.json")


def test_a_value_with_an_infinite_number_is_refused() -> None:
    text = json.dumps(_doc(_item(value={"x": 1}))).replace('{"x": 1}', '{"x": 1e400}')
    with pytest.raises(CatalogError, match="out of range"):
        catalog_from_json(text)


def test_catalog_built_in_python_checks_refs() -> None:
    item = EvidenceItem.model_validate(_item())
    with pytest.raises(CatalogError, match="more than once"):
        Catalog(snapshot_id="s", items=(item, item))
    assert Catalog(snapshot_id="s", items=(item,)).get("r1") == item
