"""The selection contract: the one thing a selector may say, and why a selection is refused.

A selector's whole output is ``{"selections": [{"kind": str, "evidence_ref": str}]}``
(docs/design.md 5). The envelope is parsed strictly by the one structured-output parser: a
missing ``selections`` key, any other top-level key, or output that is not JSON breaks the
contract and is retried once, then fails. The selections inside are judged one by one
(:mod:`foureyes.evidence.contract`): a selection with an extra key such as ``label`` or
``description`` is rejected with ``extra_fields``, and the others are still checked. The
model has no author channel: nothing it writes besides a kind name and a ref is ever kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, create_model

from foureyes.core.locale import Locale
from foureyes.evidence.kinds import KindRegistry

__all__ = [
    "REJECT_REASON_NAMES",
    "RejectReason",
    "Rejection",
    "SELECTION_KEYS",
    "Selection",
    "SelectorOutput",
    "requested_schema",
]

SELECTION_KEYS = frozenset({"kind", "evidence_ref"})
"""The only keys a selection may have."""


class RejectReason(StrEnum):
    """Why one selection was not accepted (wire strings).

    The first reason that applies, in the order listed, is the one reported.
    """

    MALFORMED = "malformed"
    """The selection is not an object with a string ``kind`` and a string ``evidence_ref``."""
    EXTRA_FIELDS = "extra_fields"
    """The selection has a key besides ``kind`` and ``evidence_ref`` (a label, a
    description, a severity...): the model tried to author text."""
    UNKNOWN_KIND = "unknown_kind"
    """The kind is not in the registry."""
    UNKNOWN_REF = "unknown_ref"
    """No record of the snapshot has that ref (it may exist in another snapshot)."""
    DUPLICATE_REF = "duplicate_ref"
    """An earlier selection already cited that record."""
    INADMISSIBLE = "inadmissible"
    """The record exists but may not be cited."""
    KIND_INCOMPATIBLE = "kind_incompatible"
    """The kind may not cite a record of that record kind (``sources``)."""
    SOURCE_INCOMPATIBLE = "source_incompatible"
    """The kind does not accept a record from that source (``record_sources``: a
    questionnaire, a wearable, not free text)."""
    UNRENDERABLE = "unrenderable"
    """The kind's template names a field the record does not have as a printable scalar."""
    ALREADY_RECORDED = "already_recorded"
    """The durable store already holds an observation of that record for the subject and
    snapshot; only the durable owner reports it."""


def _names(en: str, zh_hans: str, zh_hant: str) -> dict[Locale, str]:
    return {Locale.EN: en, Locale.ZH_HANS: zh_hans, Locale.ZH_HANT: zh_hant}


REJECT_REASON_NAMES: dict[RejectReason, dict[Locale, str]] = {
    RejectReason.MALFORMED: _names("Malformed selection", "选择格式错误", "選擇格式錯誤"),
    RejectReason.EXTRA_FIELDS: _names("Extra fields", "含多余字段", "含多餘欄位"),
    RejectReason.UNKNOWN_KIND: _names("Unknown kind", "未知类型", "未知類型"),
    RejectReason.UNKNOWN_REF: _names("Unknown record", "未知记录", "未知記錄"),
    RejectReason.DUPLICATE_REF: _names("Record cited twice", "记录重复引用", "記錄重複引用"),
    RejectReason.INADMISSIBLE: _names("Record not citable", "记录不可引用", "記錄不可引用"),
    RejectReason.KIND_INCOMPATIBLE: _names(
        "Record kind not accepted", "记录类别不符", "記錄類別不符"
    ),
    RejectReason.SOURCE_INCOMPATIBLE: _names(
        "Record source not accepted", "记录来源不符", "記錄來源不符"
    ),
    RejectReason.UNRENDERABLE: _names("Cannot be rendered", "无法生成文本", "無法生成文字"),
    RejectReason.ALREADY_RECORDED: _names("Already recorded", "已经记录", "已經記錄"),
}
"""Each reject reason's name in every locale, for whoever shows a rejection to a person."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A selection that was not accepted, as the selector wrote it, and why."""

    index: int
    """Its position in the selector's ``selections`` list."""
    selection: JsonValue
    """The selection exactly as written (output only; never persisted)."""
    reason: RejectReason
    """Why it was refused."""

    def to_json(self) -> dict[str, Any]:
        """The pinned ``rejected`` entry: ``{"selection", "reason"}`` (plus ``index``)."""
        return {"index": self.index, "selection": self.selection, "reason": self.reason.value}


class Selection(BaseModel):
    """An accepted selection's shape: a kind and the ref of the record it cites."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    kind: str
    """Name of an observation kind."""
    evidence_ref: str
    """Ref of a record in the catalog snapshot."""


class SelectorOutput(BaseModel):
    """The envelope as the parser takes it: exactly one key, ``selections``, a list.

    Its items are left as written, to be judged one by one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    selections: list[Any]
    """The selections, each still to be checked."""


def requested_schema(kinds: KindRegistry) -> type[BaseModel]:
    """The schema a selector is asked for, with ``kind`` a Literal of the registry's names.

    It is what the prompt and ``response_format`` describe; parsing uses the more lenient
    :class:`SelectorOutput`, so one bad selection does not cost the good ones.
    """
    kind_type: Any = Literal.__getitem__(kinds.names)
    closed = ConfigDict(extra="forbid", frozen=True)
    item = create_model(
        "EvidenceSelection", __config__=closed, kind=(kind_type, ...), evidence_ref=(str, ...)
    )
    return create_model("EvidenceSelections", __config__=closed, selections=(list[item], ...))
