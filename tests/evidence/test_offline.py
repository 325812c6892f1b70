import json

import pytest

from foureyes.core.errors import RouteBadResponse
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.evidence import Catalog, KindRegistry, explanation_request, selection_request
from foureyes.evidence.offline import offline_explanation, offline_selection, offline_selector
from foureyes.llm.offline import offline_roles
from foureyes.llm.provider import ChatMessage, ChatRequest
from tests.evidence._support import SMUGGLED


def test_importing_the_package_registers_the_offline_selector() -> None:
    assert Role.SELECTOR in offline_roles()


def test_it_cites_every_shown_record_some_kind_may_cite(
    catalog: Catalog, kinds: KindRegistry
) -> None:
    request = selection_request(catalog, kinds, task="任何任务")
    answer = json.loads(offline_selector(request))
    assert answer == {
        "selections": [
            {"kind": "lifestyle_habit", "evidence_ref": "diet-1"},
            {"kind": "exercise_pattern", "evidence_ref": "ex-1"},
            {"kind": "exercise_pattern", "evidence_ref": "ex-2"},
            {"kind": "report_indicator", "evidence_ref": "lab-1"},
            {"kind": "posture_finding", "evidence_ref": "posture-1"},
            {"kind": "lifestyle_habit", "evidence_ref": "sleep-1"},
        ]
    }
    # Deterministic and blind to the task: the same records give the same bytes.
    again = selection_request(catalog, kinds, task="another task entirely")
    assert offline_selector(again) == offline_selector(request)


@pytest.mark.parametrize("locale", list(Locale))
def test_its_explanation_only_counts_and_says_it_is_offline(locale: Locale) -> None:
    request = explanation_request((), task=SMUGGLED, locale=locale)
    text = offline_explanation(request)
    assert "0" in text and SMUGGLED not in text
    assert ("离线" in text) or ("離線" in text) or ("Offline" in text)
    assert offline_selector(request) == text


@pytest.mark.parametrize(
    "subject",
    [
        {},
        {"evidence_purpose": "other"},
        {"evidence_purpose": "select"},
        {"evidence_purpose": "select", "evidence_catalog": "[", "evidence_kinds": "{}"},
        {"evidence_purpose": "select", "evidence_catalog": "[1]", "evidence_kinds": "{}"},
        {"evidence_purpose": "select", "evidence_catalog": "[]", "evidence_kinds": '{"a": 1}'},
        {"evidence_purpose": "explain", "observation_count": "x", "locale": "en"},
        {"evidence_purpose": "explain", "observation_count": "1", "locale": "fr"},
    ],
)
def test_requests_it_cannot_answer_honestly_are_bad_responses(subject: dict[str, str]) -> None:
    request = ChatRequest(messages=(ChatMessage.user("x"),), role=Role.SELECTOR, subject=subject)
    with pytest.raises(RouteBadResponse):
        offline_selector(request)
    if subject.get("evidence_purpose") == "select":
        with pytest.raises(RouteBadResponse):
            offline_selection(request)
