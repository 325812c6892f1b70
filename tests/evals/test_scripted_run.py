"""The offline agent-tasks run: with no model configured, a scripted run that means something.

``foureyes eval run agent-tasks`` with a config that names no Primary serves a scripted
Primary and reviewer from an in-process ``foureyes simulate`` on loopback: the run is
labelled ``scripted``, its arms are forks of one prefix per case and sample, and its
report moves every metric (corrections, false diversions, no-update) and states its power
and the masked-against-control test before any p-value.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path

from typer.testing import CliRunner

from foureyes.cli.main import app
from foureyes.config import Config
from foureyes.evals.agent_tasks import agent_task
from foureyes.evals.scripted import Script, scripted_scenario
from foureyes.evals.suite import load_suite, suite_path
from foureyes.store import Store
from foureyes.store.evals import EvalResultRow, EvalRunRow

ARMS = "baseline,full-fork-same,masked-same,observe-only"


async def _stored(url: str) -> tuple[EvalRunRow | None, tuple[EvalResultRow, ...], set[bool]]:
    """The run ``demo``, its results, and whether each prefix trace says it is one."""
    cfg = Config.model_validate({"store": {"url": url}})
    store = await Store.open(cfg.store, cfg.privacy, {})
    try:
        rows = await store.evals.results("demo")
        traced = set()
        for trace_id in {r.record["detail"]["prefix_trace_id"] for r in rows}:
            trace = await store.traces.get(trace_id)
            traced.add(trace is not None and trace.run.meta["prefix"] is True)
        return await store.evals.get_run("demo"), rows, traced
    finally:
        await store.close()


def test_the_offline_run_is_scripted_forked_and_its_report_answers(tmp_path: Path) -> None:
    # No config at all: the offline default, its store the one the tests' environment names.
    url = f"sqlite+aiosqlite:///{tmp_path / 'foureyes.db'}"
    runner = CliRunner()
    args = ["eval", "run", "agent-tasks", "--samples", "3", "--arms", ARMS]
    ran = runner.invoke(app, [*args, "--json", "--run-id", "demo"])
    assert ran.exit_code == 0, ran.stdout
    suite = load_suite(suite_path("agent-tasks"))
    document = json.loads(ran.stdout)
    assert document["ran"] == len(suite.cases) * 3 * 4 and document["failures"] == 0

    run, rows, traced = asyncio.run(_stored(url))
    assert run is not None and run.facts["mode"] == "scripted"
    assert run.facts["samples"] == 3
    # Every case and sample: one prefix, shared by its four arms, traced as one.
    prefixes: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        prefixes[r.case_id].add(r.record["detail"]["prefix_trace_id"])
    assert len(prefixes) == len(suite.cases) * 3
    assert all(len(ids) == 1 for ids in prefixes.values()) and traced == {True}

    # The scripts decide what each arm does with each task, so the metrics are known.
    _, scripts = scripted_scenario([agent_task(suite, c) for c in suite.cases])
    by = {(r.case_id, r.arm): r for r in rows}
    for case in suite.cases:
        for n in (1, 2, 3):
            key = f"{case.id}#{n}"
            baseline, masked = by[(key, "baseline")], by[(key, "masked-same")]
            assert by[(key, "observe-only")].passed == baseline.passed  # shown nothing
            script = scripts[case.id]
            if script is Script.CATCHES:
                assert (baseline.passed, masked.passed) == (False, True)
            elif script is Script.MISLEADS:
                assert (baseline.passed, masked.passed) == (True, False)
            else:
                assert masked.record["detail"]["packet_status"] == "no_update"
                assert masked.passed == baseline.passed

    out = ["eval", "report", "demo", "--out", str(tmp_path)]
    reported = runner.invoke(app, out)
    assert reported.exit_code == 0, reported.stdout
    text = (tmp_path / "demo.md").read_text(encoding="utf-8")
    assert "**mode**: scripted" in text
    power = text.index("What this run can detect, before any p-value")
    assert power < text.index("| arm | n |")  # said before the table of p-values
    assert f"with {len(suite.cases) * 3} paired cases" in text
    assert "| masked-same | full-fork-same |" in text
