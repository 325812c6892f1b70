import ast
from pathlib import Path
from typing import Any

import pytest

from foureyes.core.locale import Locale
from foureyes.evidence import (
    REJECT_REASON_NAMES,
    Catalog,
    KindRegistry,
    RejectReason,
    catalog_from_mapping,
    check_selections,
)
from tests.evidence._support import SMUGGLED, example_document
from tests.helpers.work import lines_run

SRC = Path(__file__).resolve().parents[2] / "src" / "foureyes" / "evidence"


def _reasons(selections: list[Any], catalog: Catalog, kinds: KindRegistry) -> list[str]:
    validation = check_selections(selections, catalog, kinds, Locale.ZH_HANS)
    outcome: dict[int, str] = {r.index: r.reason.value for r in validation.rejected}
    outcome |= {a.index: "accepted" for a in validation.acceptances}
    return [outcome[i] for i in range(len(selections))]


def sel(kind: str, ref: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "evidence_ref": ref, **extra}


@pytest.mark.parametrize(
    ("selection", "reason"),
    [
        (sel("exercise_pattern", "ex-1"), "accepted"),
        (sel("exercise_pattern", "ex-1", description=SMUGGLED), "extra_fields"),
        (sel("exercise_pattern", "ex-1", label="训练量不足"), "extra_fields"),
        (sel("exercise_pattern", "ex-1", severity="high"), "extra_fields"),
        (sel("nope", "nope", description=SMUGGLED), "extra_fields"),
        ({"kind": "exercise_pattern"}, "malformed"),
        ({"evidence_ref": "ex-1"}, "malformed"),
        (sel("exercise_pattern", 1), "malformed"),  # type: ignore[arg-type]
        ("ex-1", "malformed"),
        (["exercise_pattern", "ex-1"], "malformed"),
        (None, "malformed"),
        (sel("exercise_plan", "ex-1"), "unknown_kind"),
        (sel("exercise_pattern", "ex-404"), "unknown_ref"),
        (sel("report_indicator", "lab-2"), "inadmissible"),
        (sel("exercise_pattern", "note-1"), "kind_incompatible"),
        (sel("posture_finding", "ex-1"), "kind_incompatible"),
    ],
)
def test_each_selection_gets_its_reason(
    selection: Any, reason: str, catalog: Catalog, kinds: KindRegistry
) -> None:
    assert _reasons([selection], catalog, kinds) == [reason]


def test_a_record_of_the_right_kind_from_a_source_the_kind_refuses_is_source_incompatible(
    kinds: KindRegistry,
) -> None:
    document = example_document()
    chat = {**document["items"][0], "ref": "ex-chat", "source": "chat"}
    catalog = catalog_from_mapping({**document, "items": [*document["items"], chat]})
    assert _reasons(
        [sel("exercise_pattern", "ex-chat"), sel("exercise_pattern", "ex-1")], catalog, kinds
    ) == ["source_incompatible", "accepted"]


def test_every_reject_reason_has_a_name_in_every_locale() -> None:
    assert set(REJECT_REASON_NAMES) == set(RejectReason)
    for reason in RejectReason:
        names = REJECT_REASON_NAMES[reason]
        assert set(names) == set(Locale) and all(text.strip() for text in names.values())
    assert len({names[Locale.EN] for names in REJECT_REASON_NAMES.values()}) == len(RejectReason)


def test_one_bad_selection_does_not_cost_the_good_ones(
    catalog: Catalog, kinds: KindRegistry
) -> None:
    selections = [
        sel("exercise_pattern", "ex-1", description=SMUGGLED),
        sel("exercise_pattern", "ex-2"),
        sel("posture_finding", "posture-1", label="严重"),
        sel("report_indicator", "lab-1"),
    ]
    validation = check_selections(selections, catalog, kinds, Locale.ZH_HANS)
    assert [o.evidence_ref for o in validation.accepted] == ["ex-2", "lab-1"]
    assert [(r.index, r.reason) for r in validation.rejected] == [
        (0, RejectReason.EXTRA_FIELDS),
        (2, RejectReason.EXTRA_FIELDS),
    ]
    assert validation.rejected[0].selection == selections[0]
    assert all(SMUGGLED not in o.description for o in validation.accepted)
    assert validation.acceptances[0].item == catalog.get("ex-2")


def test_a_record_is_cited_once_whatever_the_kind(catalog: Catalog, kinds: KindRegistry) -> None:
    selections = [
        sel("exercise_pattern", "ex-1"),
        sel("exercise_pattern", "ex-1"),
        sel("lifestyle_habit", "ex-1"),
        sel("report_indicator", "lab-2"),
        sel("report_indicator", "lab-2"),
        sel("exercise_pattern", "ex-2", note="x"),
        sel("exercise_pattern", "ex-2"),
        sel("nope", "sleep-1"),
        sel("lifestyle_habit", "sleep-1"),
    ]
    assert _reasons(selections, catalog, kinds) == [
        "accepted",
        "duplicate_ref",
        "duplicate_ref",
        "inadmissible",
        "duplicate_ref",
        # a selection refused before its ref was looked at does not cite the record
        "extra_fields",
        "accepted",
        "unknown_kind",
        "accepted",
    ]


def test_refs_from_another_snapshot_are_unknown(kinds: KindRegistry) -> None:
    document = example_document()
    other = catalog_from_mapping(
        {
            "snapshot_id": "body-state/u-2002/2026-03-14",
            "items": [item | {"ref": "u2-" + item["ref"]} for item in document["items"]],
        }
    )
    mine = catalog_from_mapping(document)
    selections = [sel("exercise_pattern", "u2-ex-1"), sel("exercise_pattern", "ex-1")]
    assert _reasons(selections, mine, kinds) == ["unknown_ref", "accepted"]
    assert _reasons(selections, other, kinds) == ["accepted", "unknown_ref"]


def test_a_record_missing_a_templated_field_is_unrenderable(kinds: KindRegistry) -> None:
    document = example_document()
    document["items"][0]["value"] = {"activity": "健身"}  # ex-1 loses "frequency"
    catalog = catalog_from_mapping(document)
    assert _reasons([sel("exercise_pattern", "ex-1")], catalog, kinds) == ["unrenderable"]


def _many_selections(third: int) -> list[Any]:
    """One valid selection, then ``third`` duplicates, unknown refs and smuggled fields each."""
    selections: list[Any] = [sel("exercise_pattern", "ex-1")]
    selections += [sel("exercise_pattern", "ex-1") for _ in range(third)]
    selections += [sel("exercise_pattern", f"ref-{n}") for n in range(third)]
    selections += [sel("exercise_pattern", "ex-2", description=SMUGGLED * 10) for _ in range(third)]
    return selections


def test_ten_thousand_selections_take_bounded_work_with_a_clear_outcome(
    catalog: Catalog, kinds: KindRegistry
) -> None:
    selections = _many_selections(3333)
    assert len(selections) == 10_000
    validation = check_selections(selections, catalog, kinds, Locale.EN)
    assert [o.evidence_ref for o in validation.accepted] == ["ex-1"]
    counts: dict[str, int] = {}
    for rejection in validation.rejected:
        counts[rejection.reason] = counts.get(rejection.reason, 0) + 1
    assert counts == {"duplicate_ref": 3333, "unknown_ref": 3333, "extra_fields": 3333}
    # Bounded by work, not by a clock: four times the selections, at most four times the
    # Python lines run (checking each against the others would be sixteen times).
    few, many = _many_selections(250), _many_selections(1000)
    _, work = lines_run(lambda: check_selections(few, catalog, kinds, Locale.EN))
    _, four_times = lines_run(lambda: check_selections(many, catalog, kinds, Locale.EN))
    assert four_times <= 4 * work


PURE = ("catalog", "contract", "kinds", "render", "selection")
FORBIDDEN = ("asyncio", "openai", "sqlalchemy", "foureyes.store", "foureyes.server", "aiohttp")


@pytest.mark.parametrize("module", PURE)
def test_decision_modules_do_no_io(module: str) -> None:
    tree = ast.parse((SRC / f"{module}.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        assert not isinstance(node, ast.AsyncFunctionDef) or module == "catalog"
    bad = {m for m in imported if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)}
    assert not bad, f"{module} imports {bad}"
