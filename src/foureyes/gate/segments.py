"""Segment release (``[gate] release = "segments"``): cut, bind and release a reply piecewise.

In segment mode a reply goes out in segments, each reviewed as it closes; this module is
the pure part of it (no model, no clock, no store):

- :class:`SegmentCutter` cuts text, fed piece by piece as a model streams it, into
  segments. A segment closes after a run of sentence ends: ``。！？`` or a newline
  followed by any other character, or ``.!?`` followed by whitespace (so ``3.5`` and
  ``example.com`` do not close one); a segment that reaches ``segment_max_chars``
  characters without one is cut there. Whatever is left when the text ends is the last
  segment. Joined, the segments are exactly the text.
- :class:`SegmentGate` holds what has been released so far and binds each segment to it.
  The digested bytes of segment *k* are the UTF-8 bytes of everything released before it
  followed by the segment itself, with nothing between: ``sha256(released + segment)``,
  which is the candidate digest (:func:`~foureyes.gate.candidate.candidate_bytes`, a
  text-only candidate) of the reply's text up to the end of segment *k*. So the Supervisor
  reviews, and its verdict names, the cumulative text, and the last segment's digest is
  the digest of the whole reply released. Where the segment starts is recorded beside
  the digest (``released_chars``). A segment is released only on a :class:`Decision` from
  :func:`~foureyes.gate.gate.decide` whose approved digest is that cumulative digest;
  any other decision stops the gate for good, and nothing after it is released.
- :func:`with_continuation` is what a stopped stream delivers: the released text, then
  the fallback continuation, which is the code-rendered fallback reply for the reason,
  in the user's locale (as whole release would deliver it), after a blank line; with
  nothing released, the fallback alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from foureyes.core.digest import Proposal, sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.reasons import ReasonCode
from foureyes.gate.gate import Decision
from foureyes.gate.release import PART_SEPARATOR

__all__ = [
    "CONTINUATION_SEPARATOR",
    "SENTENCE_ENDS",
    "SegmentCutter",
    "SegmentGate",
    "SegmentStep",
    "cut_segments",
    "segment_sha256",
    "with_continuation",
]

SENTENCE_ENDS = frozenset(".!?。！？\n")
"""Characters that may close a segment (en and zh sentence ends, and the newline)."""

_CLOSE_ON_ANY = frozenset("。！？\n")
_CLOSE_ON_SPACE = frozenset(".!?")

CONTINUATION_SEPARATOR = PART_SEPARATOR
"""What separates released text from the fallback continuation after it (a blank line,
as between the parts of a release)."""


class SegmentCutter:
    """Cuts streamed text into segments as they close (see the module docs).

    Pure: :meth:`feed` each piece in order, then :meth:`finish` once.
    """

    def __init__(self, max_chars: int) -> None:
        """Cut a segment at ``max_chars`` characters when no sentence end came first.

        Raises:
            UsageError: ``max_chars`` is below 1.
        """
        if max_chars < 1:
            raise UsageError("a segment holds at least one character")
        self._max = max_chars
        self._open: list[str] = []
        self._ends = False
        """Whether the open segment ends in a run of sentence ends."""
        self._closes_on_any = False
        """Whether that run has a character that closes on any following character."""
        self._finished = False

    def feed(self, piece: str) -> list[str]:
        """The segments that ``piece`` closes, in order (often none).

        Raises:
            UsageError: after :meth:`finish`.
        """
        if self._finished:
            raise UsageError("a finished cutter takes no more text")
        closed: list[str] = []
        for char in piece:
            if char in SENTENCE_ENDS:
                self._ends = True
                self._closes_on_any = self._closes_on_any or char in _CLOSE_ON_ANY
            elif self._ends and (self._closes_on_any or char.isspace()):
                closed.append(self._take())
            else:
                self._ends = self._closes_on_any = False
            self._open.append(char)
            if len(self._open) >= self._max:
                closed.append(self._take())
        return closed

    def _take(self) -> str:
        segment = "".join(self._open)
        self._open.clear()
        self._ends = self._closes_on_any = False
        return segment

    def finish(self) -> str | None:
        """The last segment (what is left open), or ``None`` when nothing is.

        Raises:
            UsageError: called twice.
        """
        if self._finished:
            raise UsageError("a cutter is finished once")
        self._finished = True
        return self._take() or None


def cut_segments(text: str, *, max_chars: int) -> list[str]:
    """``text`` cut as :class:`SegmentCutter` cuts it when it arrives in one piece."""
    cutter = SegmentCutter(max_chars)
    segments = cutter.feed(text)
    last = cutter.finish()
    return segments + ([last] if last is not None else [])


def segment_sha256(released: str, segment: str) -> str:
    """The digest a segment's verdict must name: SHA-256 of ``released + segment`` (UTF-8)."""
    return sha256_hex(released + segment)


@dataclass(frozen=True, slots=True)
class SegmentStep:
    """One segment as reviewed: where it starts, its length, the digest it is bound to."""

    index: int
    """Its position in the reply (0 first)."""
    released_chars: int
    """Characters released before it."""
    chars: int
    """Its own length."""
    sha256: str
    """:func:`segment_sha256` of the text released before it and the segment."""


class SegmentGate:
    """What one reply has released so far; releases a segment only on its approval."""

    def __init__(self) -> None:
        """Start with nothing released."""
        self._released: list[str] = []
        self._chars = 0
        self._steps: list[SegmentStep] = []
        self._stopped: ReasonCode | None = None

    @property
    def released(self) -> str:
        """The text released so far."""
        return "".join(self._released)

    @property
    def steps(self) -> tuple[SegmentStep, ...]:
        """The segments released, in order."""
        return tuple(self._steps)

    @property
    def stopped(self) -> ReasonCode | None:
        """The reason the gate stopped, or ``None`` while it is open."""
        return self._stopped

    def candidate(self, segment: str, *, role: str, route: str) -> Proposal[str]:
        """The proposal to judge for ``segment``: the released text plus it, by digest.

        Raises:
            UsageError: the gate has stopped.
        """
        self._check_open()
        return Proposal.of_text(self.released + segment, role=role, route=route)

    def release(self, segment: str, decision: Decision) -> SegmentStep | None:
        """Release ``segment`` if ``decision`` approved the released text plus it.

        A decision that is not a release, or approved another digest, stops the gate with
        its reason (``verdict_mismatch`` for another digest); nothing is released then or
        afterwards. Returns the step released, or ``None`` when the gate stopped.

        Raises:
            UsageError: the gate has already stopped.
        """
        self._check_open()
        digest = segment_sha256(self.released, segment)
        if not decision.released:
            self._stopped = decision.reason
            return None
        if not segment or decision.approved_sha256 != digest:
            self._stopped = ReasonCode.VERDICT_MISMATCH
            return None
        step = SegmentStep(
            index=len(self._steps), released_chars=self._chars, chars=len(segment), sha256=digest
        )
        self._released.append(segment)
        self._chars += len(segment)
        self._steps.append(step)
        return step

    def stop(self, reason: ReasonCode) -> None:
        """Stop the gate for ``reason`` (a failure outside any one decision: a cut-off draft).

        Raises:
            UsageError: ``reason`` is ``approved``, or the gate has already stopped.
        """
        self._check_open()
        if not reason.is_fallback:
            raise UsageError("a stopped gate needs a fallback reason, not 'approved'")
        self._stopped = reason

    def _check_open(self) -> None:
        if self._stopped is not None:
            raise UsageError(f"the segment gate has stopped ({self._stopped.value})")


def with_continuation(released: str, fallback: str) -> str:
    """What a stopped stream delivers in all: ``released``, then the fallback continuation.

    The continuation is ``fallback`` (the code-rendered fallback reply) after
    :data:`CONTINUATION_SEPARATOR`, or ``fallback`` alone when nothing was released.
    """
    return released + CONTINUATION_SEPARATOR + fallback if released else fallback
