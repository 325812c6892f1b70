"""The masked-review smoke suite over the shared recorded trajectories, offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from foureyes.evals.arms import arm_routes
from foureyes.evals.cassette import CassetteMiss, eval_providers
from foureyes.evals.report import write_report
from foureyes.evals.runner import EvalRunner
from foureyes.evals.suite import Arm, load_suite, suite_path
from foureyes.review import Mask
from foureyes.store import Store
from tests.evals._support import eval_config, store
from tests.helpers.data import require_data

__all__ = ["store"]


@pytest.fixture
def data_root() -> Path:
    return require_data("trajectories")


async def test_every_arm_reviews_every_session_and_replays(
    tmp_path: Path, store: Store, data_root: Path
) -> None:
    cfg = eval_config(tmp_path)
    suite = load_suite(suite_path("review-smoke"))
    routes = arm_routes(cfg, suite.arms)
    cassette = tmp_path / "review.jsonl"
    recording = eval_providers(cfg, routes, {}, record=cassette)
    run = EvalRunner(
        suite, suite.arms, config=cfg, providers=recording, store=store, run_id="rec",
        data_root=data_root,
    )  # fmt: skip
    summary = await run.run()
    assert (summary.ran, summary.failures) == (len(suite.cases) * len(suite.arms), 0)
    rows = {(r.case_id, r.arm): r for r in await store.evals.results("rec")}
    assert rows[("swe-agent-pydicom", "baseline")].record["detail"] == {"reviewed": False}
    observed = rows[("swe-agent-pydicom", "observe-only")].record
    assert observed["detail"]["reviewed"] and not observed["detail"]["published"]
    assert rows[("swe-agent-pydicom", "full-fork")].record["prediction"] in {"update", "no_update"}
    replaying = eval_providers(cfg, routes, {}, replay=cassette)
    again = EvalRunner(
        suite, suite.arms, config=cfg, providers=replaying, store=store, run_id="rep",
        data_root=data_root,
    )  # fmt: skip
    await again.run()
    replayed = {
        (r.case_id, r.arm): r.record["prediction"] for r in await store.evals.results("rep")
    }
    assert replayed == {k: r.record["prediction"] for k, r in rows.items()}
    files = await write_report(store, "rep", tmp_path / "out")
    assert "no significant difference" in files.markdown.read_text(encoding="utf-8")
    # Action-only on the ``strong`` route was never recorded: a request the cassette lacks.
    unseen = Arm(name="action-strong", mask=Mask.ACTION_ONLY, routes={"reviewer": "strong"})
    with pytest.raises(CassetteMiss):
        await EvalRunner(
            suite, [unseen], config=cfg, providers=replaying, store=store, run_id="miss",
            data_root=data_root,
        ).run()  # fmt: skip
    assert await store.evals.results("miss") == ()


async def test_a_missing_session_is_a_recorded_failure(tmp_path: Path, store: Store) -> None:
    cfg = eval_config(tmp_path)
    suite = load_suite(suite_path("review-smoke"))
    arms = [suite.arm("masked-same")]
    providers = eval_providers(cfg, arm_routes(cfg, arms), {})
    await EvalRunner(
        suite, arms, config=cfg, providers=providers, store=store, run_id="x", data_root=tmp_path
    ).run()
    rows = await store.evals.results("x")
    assert {r.record["failure"] for r in rows} == {"session_unreadable"}
    assert all(r.status == "failed" for r in rows)
