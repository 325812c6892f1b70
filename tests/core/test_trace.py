import datetime as dt

from foureyes.core.trace import EventKind, TraceEvent, TraceRecord, TraceRun

AT = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


def test_a_record_as_json_keeps_header_and_events_in_order() -> None:
    run = TraceRun(
        trace_id="t1",
        kind="support_message",
        conversation_id="c1",
        started_at=AT,
        finished_at=None,
        outcome=None,
        reason=None,
        input_fingerprint="f" * 64,
        input_text=None,
        meta={"route": "offline"},
    )
    events = (
        TraceEvent(EventKind.RISK, "triage", {"level": "low"}, at=AT),
        TraceEvent(EventKind.DECISION, "gate", {"reason": "approved"}, at=AT),
    )
    as_json = TraceRecord(run, events).as_json()
    assert as_json["run"]["started_at"] == "2026-11-30T09:00:00+00:00"
    assert as_json["run"]["finished_at"] is None and as_json["run"]["meta"] == {"route": "offline"}
    assert [(e["kind"], e["stage"]) for e in as_json["events"]] == [
        ("risk", "triage"),
        ("decision", "gate"),
    ]
    assert as_json["events"][1]["data"] == {"reason": "approved"}
