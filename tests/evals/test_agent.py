"""The Primary agent loop over real HTTP: a scripted model through ``foureyes simulate``."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.config import Config, RolesConfig
from foureyes.evals.agent import AgentLoop, Checkpoint, StopReason, review_checkpoint
from foureyes.evals.agent_tasks import agent_task, task_workspace
from foureyes.evals.arms import arm_routes
from foureyes.evals.cassette import eval_providers
from foureyes.evals.report import load_metrics, render_markdown
from foureyes.evals.runner import EvalRunner
from foureyes.evals.sandbox import NoSandbox
from foureyes.evals.suite import load_suite, suite_path
from foureyes.evals.verify import VerifierResult
from foureyes.evals.workspace import ToolLimits, Workspace
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.review import (
    Mask,
    Projection,
    PublicationPolicy,
    Window,
    check_packet,
    project,
)
from foureyes.review.importers import native
from foureyes.review.session import (
    AssistantMessage,
    EndReason,
    MessageSource,
    ToolResult,
    TurnEnd,
    UserMessage,
)
from foureyes.store import Store
from tests.evals._support import eval_config, store
from tests.helpers.simulator import RunningSimulator, simulator, simulator_process
from tests.review._runner_support import REVIEWER_MODEL, packet
from tests.review.test_reviewer import reviewer_for

__all__ = ["simulator", "simulator_process", "store"]

MODEL = "primary-sim"
USAGE = {"prompt_tokens": 100, "completion_tokens": 7}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": json.dumps(arguments)}


def step(*calls: dict[str, Any], content: str | None = None, **rule: Any) -> dict[str, Any]:
    """One scripted answer, used once: its tool calls (or, without any, a final text)."""
    answer: dict[str, Any] = {"times": 1, "usage": USAGE, "content": content, **rule}
    if calls:
        answer["tool_calls"] = list(calls)
    return answer


@pytest.fixture
async def caller(simulator: RunningSimulator, tmp_path: Path) -> AsyncIterator[ModelCaller]:
    cfg = Config.model_validate(
        {
            "store": {"url": f"sqlite+aiosqlite:///{tmp_path}/agent.db"},
            "routes": {"primary_sim": simulator.route(MODEL, timeout_s=5).model_dump()},
            "roles": RolesConfig(primary="primary_sim").model_dump(),
        }
    )
    routes = Routes.build(cfg, {})
    try:
        yield ModelCaller(routes)
    finally:
        await routes.aclose()


@pytest.fixture
async def reviewing(simulator: RunningSimulator, tmp_path: Path) -> AsyncIterator[ModelCaller]:
    """A caller with the Primary and the reviewer both on the simulator (two models)."""
    cfg = Config.model_validate(
        {
            "store": {"url": f"sqlite+aiosqlite:///{tmp_path}/agent.db"},
            "routes": {
                "primary_sim": simulator.route(MODEL, timeout_s=5).model_dump(),
                "reviewer_sim": simulator.route(REVIEWER_MODEL, timeout_s=5).model_dump(),
            },
            "roles": RolesConfig(primary="primary_sim", reviewer="reviewer_sim").model_dump(),
        }
    )
    routes = Routes.build(cfg, {})
    try:
        yield ModelCaller(routes)
    finally:
        await routes.aclose()


@pytest.fixture
def log_task() -> Iterator[tuple[Any, Path]]:
    suite = load_suite(suite_path("agent-tasks"))
    task = agent_task(suite, next(c for c in suite.cases if c.id == "log-severity"))
    with task_workspace(task) as workspace:
        yield task, workspace


def script(simulator: RunningSimulator, *answers: dict[str, Any]) -> None:
    simulator.load({"models": {MODEL: list(answers)}})


def results(session: Any) -> list[ToolResult]:
    return [e for e in session.events if isinstance(e, ToolResult)]


async def test_a_scripted_primary_reads_edits_runs_the_check_and_fixes_the_task(
    simulator: RunningSimulator, caller: ModelCaller, log_task: tuple[Any, Path]
) -> None:
    task, workspace = log_task
    script(
        simulator,
        step(call("search", pattern="def keep"), reasoning_content="Where is keep?"),
        step(call("read", path="logfilter.py")),
        step(
            call(
                "edit",
                path="logfilter.py",
                old="return level >= minimum",
                new="return LEVELS.index(level) >= LEVELS.index(minimum)",
            )
        ),
        step(call("run", command="python check.py")),
        step(content="Levels are now compared by their rank."),
    )
    assert await task.verify(workspace) is VerifierResult.REJECTED
    result = await AgentLoop(caller, Workspace(workspace)).run(task.statement)
    assert result.stop is StopReason.COMPLETED and result.steps == 5
    assert await task.verify(workspace) is VerifierResult.PASSED
    assert result.usage.prompt_tokens == 5 * 100 and result.usage.completion_tokens == 5 * 7
    assert result.answer == "Levels are now compared by their rank."
    found, read, edited, ran = results(result.session)
    assert found.content == "logfilter.py:4:def keep(level, minimum):"
    assert "return level >= minimum" in read.content and not read.error
    assert edited.content == "replaced 1 occurrence in logfilter.py"
    assert ran.content.startswith("exit status 0") and not ran.error
    # Each request was rendered from the session: the last one ends with the run's result.
    sent = simulator.requests()
    assert len(sent) == 5
    assert sent[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": ran.call_id,
        "content": ran.content,
    }
    assert sent[0]["messages"][1] == {"role": "user", "content": task.statement}
    assert [t["function"]["name"] for t in sent[0]["options"]["tools"]] == [
        "read",
        "search",
        "edit",
        "run",
    ]
    # The session it recorded is native: it reads back equal, ends its turn, and projects.
    session = result.session
    assert native.loads(session.to_jsonl()) == session
    assert session.events[-1] == TurnEnd(turn_id="t1", reason=EndReason.COMPLETED)
    view = project(
        session, Window.recent(2), Mask.REASONING_ONLY, max_snapshot_chars=65536, max_images=0
    )
    assert isinstance(view, Projection) and view.meta.steps >= 2
    assert "Where is keep?" not in view.snapshot_text


async def test_sandbox_escapes_are_refused_as_tool_errors(
    simulator: RunningSimulator, caller: ModelCaller, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET", encoding="utf-8")
    (workspace / "link.txt").symlink_to(outside)
    (workspace / "linkdir").symlink_to(tmp_path)
    escapes = [
        call("read", path="../outside.txt"),
        call("read", path=str(outside)),
        call("read", path="link.txt"),
        call("read", path="linkdir/outside.txt"),
        call("edit", path="../outside.txt", content="overwritten"),
        call("edit", path="link.txt", old="SECRET", new="changed"),
        call("edit", path="linkdir/new.txt", content="x"),
        call("search", pattern="SECRET", path=".."),
        call("search", pattern="SECRET"),
        call("nope"),
        {"name": "read", "arguments": "{not json"},
        call("read", path="missing.txt"),
    ]
    script(simulator, step(*escapes), step(content="Done."))
    result = await AgentLoop(caller, Workspace(workspace)).run("Try to get out.")
    assert result.stop is StopReason.COMPLETED and result.steps == 2
    outcomes = results(result.session)
    assert len(outcomes) == len(escapes)
    # Inside the workspace a search through the symlink finds nothing; everything else fails.
    assert outcomes[8].content == "no match" and not outcomes[8].error
    refused = outcomes[:8]
    assert all(r.error for r in (*refused, *outcomes[9:]))
    assert all("outside the workspace" in r.content for r in refused if r is not refused[1])
    assert "absolute path" in refused[1].content
    assert not any("SECRET" in r.content for r in outcomes)
    assert outside.read_text(encoding="utf-8") == "SECRET"
    assert not (tmp_path / "new.txt").exists()


async def test_a_command_over_its_time_limit_is_killed_and_reported(tmp_path: Path) -> None:
    # Unsandboxed, so the child's pid is the host's (the sandboxed case: test_sandbox.py).
    workspace = Workspace(
        tmp_path, ToolLimits(run_timeout_s=0.5, max_output_chars=1000), sandbox=NoSandbox()
    )
    outcome = await workspace.call(
        "run", json.dumps({"command": "sleep 60 & echo $! > pid.txt; echo started; wait"})
    )
    assert outcome.error and outcome.content.startswith("killed after 0.5 s (the time limit)")
    assert "started" in outcome.content
    # The command's whole process group was killed: its background child too.
    pid = int((tmp_path / "pid.txt").read_text())
    assert _gone_or_zombie(pid)
    flood = await workspace.call("run", json.dumps({"command": "python -c \"print('x' * 50000)\""}))
    assert not flood.error and "[cut:" in flood.content and len(flood.content) < 2000
    where = await workspace.call("run", json.dumps({"command": 'pwd; ls "$HOME"'}))
    assert where.content == "exit status 0\n.\npid.txt\n"
    failing = await workspace.call("run", json.dumps({"command": "exit 3"}))
    assert failing.error and failing.content.startswith("exit status 3")
    env = await workspace.call("run", json.dumps({"command": "env"}))
    names = {line.split("=", 1)[0] for line in env.content.splitlines()[1:] if "=" in line}
    assert "HOME" in names and not names & {"VIRTUAL_ENV", "PYTEST_CURRENT_TEST"}


def _gone_or_zombie(pid: int) -> bool:
    for _ in range(200):  # the kill is sent; reaping by init may take a moment
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in {"Z", "X"}:
            return True
        time.sleep(0.01)
    return False


async def test_the_step_budget_stops_a_primary_that_never_ends_its_turn(
    simulator: RunningSimulator, caller: ModelCaller, tmp_path: Path
) -> None:
    forever = {"usage": USAGE, "content": None, "tool_calls": [call("run", command="echo hi")]}
    script(simulator, forever)
    result = await AgentLoop(caller, Workspace(tmp_path), max_steps=3).run("Loop.")
    assert result.stop is StopReason.STEP_BUDGET and result.steps == 3
    assert len(simulator.requests()) == 3
    assert result.session.events[-1] == TurnEnd(turn_id="t1", reason=EndReason.ABORTED)
    assert [s.completed for s in result.session.steps()] == [True, True, True]


async def test_a_failed_model_call_ends_the_loop_with_its_reason(
    simulator: RunningSimulator, caller: ModelCaller, tmp_path: Path
) -> None:
    script(simulator, step(call("run", command="echo hi")), step(fault="http_500"))
    result = await AgentLoop(caller, Workspace(tmp_path)).run("Go.")
    assert result.stop is StopReason.MODEL_FAILED and result.failure == "route_failed"
    assert result.steps == 2 and result.usage.prompt_tokens == 100
    assert result.session.events[-1] == TurnEnd(turn_id="t1", reason=EndReason.ERROR)


@pytest.mark.parametrize(
    ("finish", "failure"),
    [("length", "truncated"), ("content_filter", "content_filtered")],
)
async def test_a_tool_call_in_an_answer_that_did_not_finish_normally_never_runs(
    simulator: RunningSimulator,
    caller: ModelCaller,
    tmp_path: Path,
    finish: str,
    failure: str,
) -> None:
    cut = step(call("edit", path="acted.txt", content="x"), finish_reason=finish)
    script(simulator, cut, step(content="Done."))
    result = await AgentLoop(caller, Workspace(tmp_path)).run("Write it.")
    assert (result.stop, result.failure) == (StopReason.INCOMPLETE, failure)
    assert not (tmp_path / "acted.txt").exists()
    assert results(result.session) == [] and result.steps == 1
    assert result.session.events[-1] == TurnEnd(turn_id="t1", reason=EndReason.MAX_TOKENS)


async def test_the_publication_hook_shows_a_packet_as_a_plugin_message_and_the_loop_goes_on(
    simulator: RunningSimulator, caller: ModelCaller, tmp_path: Path
) -> None:
    checked = check_packet(
        json.dumps(
            {
                "role": "masked-review",
                "status": "update",
                "items": [
                    {
                        "kind": "possible_error",
                        "certainty": "likely",
                        "content": "The equal level is dropped.",
                    }
                ],
            }
        ),
        max_chars=10_000,
    )
    assert checked.packet is not None
    packet = checked.packet
    seen: list[tuple[int, bool]] = []

    async def hook(point: Checkpoint) -> Any:
        seen.append((point.steps, point.stopping))
        assert point.session.open_turns()  # the hook sees the turn still open
        return packet if point.stopping and point.steps == 2 else None

    script(
        simulator,
        step(call("run", command="echo hi")),
        step(content="Done."),
        step(content="Checked the equal level too.", match="equal level is dropped"),
    )
    result = await AgentLoop(caller, Workspace(tmp_path), publish=hook).run("Go.")
    assert result.stop is StopReason.COMPLETED and result.steps == 3
    assert seen == [(1, False), (2, True), (3, True)]
    assert result.published == (packet.sha256,)
    shown = [
        e
        for e in result.session.events
        if isinstance(e, UserMessage) and e.source is not MessageSource.USER
    ]
    assert len(shown) == 1 and shown[0].source is MessageSource.PLUGIN
    assert packet.render() in shown[0].content
    # No assistant message was forged: one per model call.
    assistant = [e for e in result.session.events if isinstance(e, AssistantMessage)]
    assert len(assistant) == len(simulator.requests()) == 3
    assert result.answer == "Checked the equal level too."
    assert simulator.requests()[-1]["messages"][-1]["role"] == "user"


def _two_task_suite(folder: Path) -> Path:
    """The shipped suite cut to two tasks (same files, validated by the same loader)."""
    shutil.copytree(suite_path("agent-tasks"), folder)
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    kept = [c for c in cases if c["id"] in {"log-severity", "clamp"}]
    (folder / "cases.json").write_text(json.dumps(kept), encoding="utf-8")
    return folder


async def test_eval_run_of_an_agent_suite_lets_the_verifier_decide_each_pair(
    simulator: RunningSimulator, tmp_path: Path, store: Store
) -> None:
    # log-severity gets the right fix; clamp gets the plausible wrong one (its check passes).
    right = "return LEVELS.index(level) >= LEVELS.index(minimum)"
    script(
        simulator,
        {
            "match": "filter_logs in logfilter.py",
            "usage": USAGE,
            "content": None,
            "tool_calls": [
                call("edit", path="logfilter.py", old="return level >= minimum", new=right)
            ],
        },
        {
            "match": "clamp\\(x, lo, hi\\) in clamp.py",
            "usage": USAGE,
            "content": None,
            "tool_calls": [
                call("edit", path="clamp.py", old="max(lo, min(x, lo))", new="min(x, hi)")
            ],
        },
        {
            "match": "^replaced 1 occurrence in clamp.py",
            "usage": USAGE,
            "content": None,
            "tool_calls": [call("run", command="pwd")],  # the copy's path: "." when recorded
        },
        {
            "match": "^replaced 1 occurrence in logfilter.py|^exit status 0",
            "usage": USAGE,
            "content": "Fixed.",
        },
    )
    cfg = eval_config(tmp_path, primary_sim=simulator.route(MODEL, timeout_s=5).model_dump())
    cfg = cfg.model_validate(cfg.model_dump() | {"roles": {"primary": "primary_sim"}})
    suite = load_suite(_two_task_suite(tmp_path / "suite"))
    cassette = tmp_path / "agent.cassette.jsonl"
    used = arm_routes(cfg, suite.arms)
    recording = eval_providers(cfg, used, {}, record=cassette)
    try:
        summary = await EvalRunner(
            suite, [suite.baseline], config=cfg, providers=recording, store=store, run_id="agent"
        ).run()
    finally:
        for provider in recording.values():
            await provider.aclose()
    assert summary.ran == 2 and summary.failures == 0
    rows = {r.case_id: r for r in await store.evals.results("agent")}
    assert rows["log-severity"].passed and rows["log-severity"].record["prediction"] == "done"
    assert not rows["clamp"].passed and rows["clamp"].record["prediction"] == "not_done"
    detail = rows["clamp"].record["detail"]
    assert detail["stop"] == "completed" and detail["steps"] == 3
    assert detail["verifier"] == "rejected" and rows["clamp"].record["calls"] == 3
    assert len(simulator.requests()) == 5
    # Each pair worked in its own copy: the shipped repositories are untouched.
    shipped = suite_path("agent-tasks") / "tasks" / "clamp" / "repo" / "clamp.py"
    assert "max(lo, min(x, lo))" in shipped.read_text(encoding="utf-8")
    # Offline replay in fresh copies elsewhere: the same requests, the same verdicts.
    replaying = eval_providers(cfg, used, {}, replay=cassette)
    await EvalRunner(
        suite, [suite.baseline], config=cfg, providers=replaying, store=store, run_id="again"
    ).run()
    again = {r.case_id: r.record["prediction"] for r in await store.evals.results("again")}
    assert again == {"log-severity": "done", "clamp": "not_done"}
    assert len(simulator.requests()) == 5


async def test_eval_run_of_the_agent_suite_offline_records_every_pair_as_a_route_failure(
    tmp_path: Path, store: Store
) -> None:
    cfg = eval_config(tmp_path)
    suite = load_suite(suite_path("agent-tasks"))
    providers = eval_providers(cfg, arm_routes(cfg, suite.arms), {})
    summary = await EvalRunner(
        suite, suite.arms, config=cfg, providers=providers, store=store, run_id="offline"
    ).run()
    # Every arm runs (the eval config has an offline route called strong); the offline
    # engine has no Primary, so every pair is a recorded route failure (the CLI runs the
    # scripted Primary instead: tests/evals/test_scripted_run.py).
    assert summary.ran == summary.failures == len(suite.cases) * len(suite.arms)
    rows = await store.evals.results("offline")
    assert {r.record["failure"] for r in rows} == {"route_failed"}
    assert {r.arm for r in rows} == {a.name for a in suite.arms}
    run, metrics = await load_metrics(store, "offline")
    reviews = {a.arm: a.review for a in metrics.arms}
    assert all(r is not None and r.reviewed == 0 and r.adoption is None for r in reviews.values())
    assert "## Reviews and tokens" in render_markdown(run, metrics)


_SEGMENTS = st.sampled_from(["..", ".", "a", "out", "link.txt", "", "x.txt", "/"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_SEGMENTS, min_size=1, max_size=6))
async def test_no_path_the_model_writes_reaches_outside_the_workspace(segments: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        outside, workspace = root / "outside", root / "ws"
        outside.mkdir()
        (workspace / "a").mkdir(parents=True)
        (workspace / "out").symlink_to(outside, target_is_directory=True)
        (workspace / "link.txt").symlink_to(outside / "x.txt")
        path = "/".join(segments)
        outcome = await Workspace(workspace).call(
            "edit", json.dumps({"path": path, "content": "x"})
        )
        assert list(outside.iterdir()) == []
        assert sorted(p.name for p in root.iterdir()) == ["outside", "ws"]
        if not outcome.error:
            assert any(f.read_text() == "x" for f in workspace.rglob("*") if f.is_file())


async def test_an_answer_cut_at_the_token_limit_ends_the_turn_as_incomplete(
    simulator: RunningSimulator, caller: ModelCaller, tmp_path: Path
) -> None:
    script(simulator, step(content="I changed the file and then", fault="truncated"))
    result = await AgentLoop(caller, Workspace(tmp_path)).run("Go.")
    assert result.stop is StopReason.INCOMPLETE and result.steps == 1
    assert result.session.events[-1] == TurnEnd(turn_id="t1", reason=EndReason.MAX_TOKENS)


FINDING = "Equal levels are dropped by the string comparison."


def sent_by(simulator: RunningSimulator, model: str) -> list[dict[str, Any]]:
    return [r for r in simulator.requests() if r["model"] == model]


async def test_the_primary_calls_deliberate_reads_the_packet_and_goes_on(
    simulator: RunningSimulator, reviewing: ModelCaller, tmp_path: Path
) -> None:
    simulator.load(
        {
            "models": {
                MODEL: [
                    step(call("run", command="echo checked"), reasoning_content="HIDDEN-ONE"),
                    step(
                        call("deliberate", role="masked-review", recentSteps=1),
                        reasoning_content="HIDDEN-TWO",
                    ),
                    step(content="Compared the levels by rank.", match="string comparison"),
                ],
                REVIEWER_MODEL: [{"content": packet(FINDING, kind="possible_error")}],
            }
        }
    )
    reviewer = reviewer_for(reviewing)
    loop = AgentLoop(
        reviewing, Workspace(tmp_path), reviewer=reviewer, publish=review_checkpoint(reviewer)
    )
    result = await loop.run("Fix the filter.")
    assert result.stop is StopReason.COMPLETED and result.steps == 3
    primary = sent_by(simulator, MODEL)
    assert [t["function"]["name"] for t in primary[0]["options"]["tools"]] == [
        "read",
        "search",
        "edit",
        "run",
        "deliberate",
    ]
    # The recorded session shows the call and its result: the packet, as a tool result.
    (_, asked, _) = [e for e in result.session.events if isinstance(e, AssistantMessage)]
    (deliberation,) = [b for b in asked.blocks if getattr(b, "name", "") == "deliberate"]
    answered = results(result.session)[-1]
    assert answered.call_id == deliberation.call_id and not answered.error
    head = json.loads(answered.content.split("\n", 1)[0])
    assert head == {
        "deliberate": "packet",
        "reason": "accepted",
        "role": "masked-review",
        "window": "recent:1",
        "masked_steps": 1,
    }
    assert FINDING in answered.content and len(result.published) == 1
    assert result.published[0] in answered.content
    assert primary[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": deliberation.call_id,
        "content": answered.content,
    }
    # The reviewer saw the step before the call, masked; not the call nor its reasoning.
    (review,) = sent_by(simulator, REVIEWER_MODEL)  # the checkpoint skipped: deliberate ran
    snapshot = json.dumps(review["messages"])
    assert "exit status 0" in snapshot and "checked" in snapshot
    assert "HIDDEN-ONE" not in snapshot and "HIDDEN-TWO" not in snapshot
    assert deliberation.call_id not in snapshot
    # Nothing was forged: one assistant message per Primary call, no plugin message.
    assert len(primary) == 3
    assert not [e for e in result.session.events if isinstance(e, UserMessage)][1:]


@pytest.mark.parametrize(
    ("policy", "answer", "shown"),
    [
        (PublicationPolicy.UPDATES_ONLY, packet(FINDING), True),
        (PublicationPolicy.UPDATES_ONLY, packet(), False),
        (PublicationPolicy.OBSERVE_ONLY, packet(FINDING), False),
    ],
)
async def test_the_checkpoint_reviews_at_the_turn_stop_and_publishes_by_policy(
    simulator: RunningSimulator,
    reviewing: ModelCaller,
    tmp_path: Path,
    policy: PublicationPolicy,
    answer: str,
    shown: bool,
) -> None:
    simulator.load(
        {
            "models": {
                MODEL: [
                    step(call("run", command="echo hi"), reasoning_content="HIDDEN-ONE"),
                    step(content="Done."),
                    step(content="Checked the equal level too.", match="string comparison"),
                ],
                REVIEWER_MODEL: [{"content": answer}],
            }
        }
    )
    hook = review_checkpoint(reviewer_for(reviewing, policy=policy))
    result = await AgentLoop(reviewing, Workspace(tmp_path), publish=hook).run("Go.")
    (review,) = sent_by(simulator, REVIEWER_MODEL)  # once, at the first stop only
    assert "HIDDEN-ONE" not in json.dumps(review["messages"])
    assert "deliberate" not in json.dumps(sent_by(simulator, MODEL)[0]["options"]["tools"])
    plugin = [
        e
        for e in result.session.events
        if isinstance(e, UserMessage) and e.source is MessageSource.PLUGIN
    ]
    assistant = [e for e in result.session.events if isinstance(e, AssistantMessage)]
    assert result.stop is StopReason.COMPLETED
    assert len(assistant) == len(sent_by(simulator, MODEL)) == result.steps == (3 if shown else 2)
    assert len(plugin) == len(result.published) == int(shown)
    if shown:
        assert FINDING in plugin[0].content and result.published[0] in plugin[0].content
        assert result.answer == "Checked the equal level too."
