import pytest

from foureyes.core.errors import ContractError
from foureyes.evidence import KindRegistry, SelectorOutput, requested_schema
from foureyes.llm.structured import ParseFailure, json_schema_format, parse_structured


def test_the_requested_schema_is_closed_with_kinds_from_the_registry(kinds: KindRegistry) -> None:
    schema = json_schema_format(requested_schema(kinds)).schema_
    item = schema["$defs"]["EvidenceSelection"]
    assert schema["additionalProperties"] is False and schema["required"] == ["selections"]
    assert item["additionalProperties"] is False
    assert set(item["properties"]) == {"kind", "evidence_ref"}
    assert item["properties"]["kind"]["enum"] == list(kinds.names)


def test_the_envelope_keeps_items_as_written() -> None:
    text = 'Sure: {"selections": [{"kind": "a", "evidence_ref": "b", "label": "x"}, 3]}'
    output = parse_structured(text, SelectorOutput)
    assert output.selections == [{"kind": "a", "evidence_ref": "b", "label": "x"}, 3]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"selections": [], "explanation": "训练量不足"}', ParseFailure.EXTRA_FIELDS),
        ('{"choices": []}', ParseFailure.EXTRA_FIELDS),
        ("{}", ParseFailure.SCHEMA_INVALID),
        ('{"selections": {"kind": "a"}}', ParseFailure.SCHEMA_INVALID),
        ("I picked ex-1.", ParseFailure.NO_JSON),
        ('[{"kind": "a"}]', ParseFailure.NOT_OBJECT),
    ],
)
def test_a_broken_envelope_breaks_the_contract(text: str, reason: ParseFailure) -> None:
    with pytest.raises(ContractError) as caught:
        parse_structured(text, SelectorOutput)
    assert caught.value.reason == reason
