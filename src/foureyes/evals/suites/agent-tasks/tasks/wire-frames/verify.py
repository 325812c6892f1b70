"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from chat import receive, send

failed = 0


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{label}: expected {repr(expected)[:120]}, got {repr(got)[:120]}")


def frame(text):
    """A frame as the server writes it."""
    payload = text.encode("utf-8")
    return len(payload).to_bytes(2, "big") + payload


MESSAGES = [
    ["café", "ok"],
    ["hello"],
    [""],
    ["", "x", ""],
    ["日本語のメッセージ", "Grüße", "👍🏽"],
    ["naïve façade", "ASCII only", "Ελληνικά"],
    ["é" * 200],
    ["x" * 300, "y"],
    ["€" * 1000, "end"],
]
for messages in MESSAGES:
    shown = repr(messages)[:40]
    expect(f"round trip {shown}", lambda m=messages: receive(send(m)), messages)
    expect(f"bytes sent for {shown}", lambda m=messages: send(m), b"".join(frame(t) for t in messages))
    expect(f"server frames {shown}", lambda m=messages: receive(b"".join(frame(t) for t in m)), messages)
expect("nothing", lambda: (send([]), receive(b"")), (b"", []))
expect("café on the wire", lambda: send(["café"]), b"\x00\x05caf\xc3\xa9")
sys.exit(1 if failed else 0)
