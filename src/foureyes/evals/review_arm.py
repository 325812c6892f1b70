"""What a masked-review arm does with one case: review a recorded session, or not.

A review case names a session file (relative to the run's data root) and a window. The
baseline arm makes no review; the others project the session through their mask and ask
the configured reviewer once. Observe-only runs the review but publishes nothing to the
primary. The smoke suite has no ground truth: a pair passes when the arm produced its
review (or its deliberate absence) without a failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from foureyes.config import Config
from foureyes.evals.arms import CaseAnswer
from foureyes.evals.suite import Arm, Case, Suite, SuiteKind
from foureyes.llm.calls import ModelCaller
from foureyes.llm.provider import Provider
from foureyes.llm.routes import Routes
from foureyes.review import (
    PublicationPolicy,
    Reviewer,
    ReviewRunner,
    SessionFormatError,
    Window,
    load_session,
)
from foureyes.store import Store

__all__ = ["NO_REVIEW", "answer_review_case", "missing_sessions"]

NO_REVIEW = "no_update"
"""The baseline's prediction: no review, so nothing to add (a packet's ``no_update``)."""


def missing_sessions(suite: Suite, arms: Sequence[Arm], data_root: Path) -> list[str]:
    """What keeps ``arms`` from reviewing ``suite``'s sessions under ``data_root``.

    The root itself when it is not a folder, else every case whose session file is absent.
    Empty when every session is there, or when no arm reviews (the baseline only). A run
    over missing sessions would record every reviewing pair as failed and report it as if
    the arms had been compared, so the runner refuses it before any pair runs.
    """
    if suite.kind is not SuiteKind.REVIEW or all(arm.mask is None for arm in arms):
        return []
    if not data_root.is_dir():
        return [
            f"the data root {str(data_root)!r} is not a folder: pass --data-root, the folder "
            "this suite's session files are under"
        ]
    return [
        f"case {case.id}: no session file {str(data_root / case.state.get('session', ''))!r}"
        for case in suite.cases
        if not (data_root / case.state.get("session", "")).is_file()
    ]


async def answer_review_case(
    arm: Arm,
    case: Case,
    *,
    config: Config,
    providers: Mapping[str, Provider],
    store: Store,
    data_root: Path,
) -> CaseAnswer:
    """Review the case's session as ``arm`` configures it (no review for a mask of ``None``).

    Raises:
        StoreError: the store failed.
        CassetteMiss: a replayed request is not in the cassette.
    """
    if arm.mask is None:
        return CaseAnswer(prediction=NO_REVIEW, output="", detail={"reviewed": False})
    path = data_root / case.state.get("session", "")
    try:
        session = load_session(path)
        window = Window.parse(case.state.get("window", "current-turn"))
    except (OSError, SessionFormatError, ValueError) as exc:
        return CaseAnswer(
            prediction=None,
            output="",
            failure="session_unreadable",
            detail={"error": type(exc).__name__},
        )
    caller = ModelCaller(Routes(config, providers), ledger=store.ledger, trace=store.traces)
    runner = ReviewRunner(caller, packet_max_chars=config.review.packet_max_chars)
    policy = PublicationPolicy.OBSERVE_ONLY if arm.observe_only else PublicationPolicy.UPDATES_ONLY
    review = await Reviewer(runner, config.review, policy=policy).review(
        session, window=window, mask=arm.mask
    )
    detail = {"reviewed": True, "published": review.publication is not None}
    if review.skipped is not None:
        failure = f"projection_skipped:{review.skipped.reason.value}"
        return CaseAnswer(prediction=None, output="", failure=failure, detail=detail)
    if review.outcome is None:
        return CaseAnswer(prediction=None, output="", failure="no_outcome", detail=detail)
    if review.outcome.packet is None:
        return CaseAnswer(
            prediction=None, output="", failure=review.outcome.reason.value, calls=1, detail=detail
        )
    packet = review.outcome.packet
    return CaseAnswer(
        prediction=packet.status.value,
        output=packet.render(),
        calls=1,
        detail=detail | {"items": len(packet.items)},
    )
