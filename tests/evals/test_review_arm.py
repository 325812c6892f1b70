"""The masked-review smoke suite over the shared recorded trajectories, offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from foureyes.evals.arms import arm_routes
from foureyes.evals.cassette import CassetteMiss, eval_providers
from foureyes.evals.report import write_report
from foureyes.evals.runner import EvalRunner
from foureyes.evals.suite import Arm, SuiteError, load_suite, suite_path
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
    # The offline reviewer reviews nothing: every reviewing pair says so, none passes as one.
    reviewing = [arm for arm in suite.arms if arm.mask is not None]
    assert summary.ran == len(suite.cases) * len(suite.arms)
    assert summary.failures == len(suite.cases) * len(reviewing)
    rows = {(r.case_id, r.arm): r for r in await store.evals.results("rec")}
    assert rows[("swe-agent-pydicom", "baseline")].record["detail"] == {"reviewed": False}
    observed = rows[("swe-agent-pydicom", "observe-only")].record
    assert observed["detail"]["reviewed"] and not observed["detail"]["published"]
    assert {rows[(c.id, a.name)].record["failure"] for c in suite.cases for a in reviewing} == {
        "reviewer_offline"
    }
    assert rows[("swe-agent-pydicom", "full-fork")].record["prediction"] is None
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


@pytest.mark.parametrize("where", ["missing-root", "empty-root"])
async def test_missing_sessions_are_refused_before_any_pair_runs(
    tmp_path: Path, store: Store, where: str
) -> None:
    cfg = eval_config(tmp_path)
    suite = load_suite(suite_path("review-smoke"))
    arms = [suite.arm("baseline"), suite.arm("masked-same")]
    providers = eval_providers(cfg, arm_routes(cfg, arms), {})
    root = tmp_path / where
    if where == "empty-root":
        root.mkdir()
    runner = EvalRunner(
        suite, arms, config=cfg, providers=providers, store=store, run_id="x", data_root=root
    )

    with pytest.raises(SuiteError) as refused:
        await runner.run()

    problems = refused.value.problems
    if where == "missing-root":
        assert list(problems) == [
            f"the data root {str(root)!r} is not a folder: pass --data-root, the folder "
            "this suite's session files are under"
        ]
    else:
        assert len(problems) == len(suite.cases)
        assert all(
            p.startswith(f"case {c.id}: no session file")
            for p, c in zip(problems, suite.cases, strict=True)
        )
    assert await store.evals.results("x") == ()
    # The baseline alone reviews nothing, so it needs no sessions.
    baseline = EvalRunner(
        suite, arms[:1], config=cfg, providers=providers, store=store, run_id="b", data_root=root
    )
    assert (await baseline.run()).failures == 0


def test_a_review_run_without_its_data_exits_1_with_no_report(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from foureyes.cli.main import app

    config = tmp_path / "c.toml"
    config.write_text(f'[store]\nurl = "sqlite+aiosqlite:///{tmp_path}/e.db"\n', encoding="utf-8")
    missing = tmp_path / "no-such-folder"
    args = ["eval", "run", "review-smoke", "-c", str(config), "--data-root", str(missing)]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 1
    assert "--data-root" in result.stdout and "SuiteError" in result.stdout
