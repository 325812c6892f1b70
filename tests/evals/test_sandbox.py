"""The sandbox of the Primary's commands and the verifiers, through the real tools.

Every probe also runs unsandboxed (:class:`NoSandbox`) as its control: there it reaches
what the sandbox hides, so a probe that fails in the sandbox fails because of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import site
import socket
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import foureyes
from foureyes.cli.main import app
from foureyes.config import Config
from foureyes.evals import (
    AgentTask,
    Bubblewrap,
    EvalRunner,
    NoSandbox,
    Sandbox,
    SandboxUnavailable,
    SuiteError,
    TaskFix,
    ToolLimits,
    VerifierResult,
    Workspace,
    active_sandbox,
    agent_task,
    apply_fix,
    arm_routes,
    eval_providers,
    load_suite,
    sandbox_named,
    suite_path,
    task_workspace,
    use_sandbox,
)
from foureyes.store import Store
from tests.evals._support import eval_config, store

__all__ = ["store"]

SUITE = load_suite(suite_path("agent-tasks"))
CLAMP = agent_task(SUITE, next(c for c in SUITE.cases if c.id == "clamp"))
VERIFIER_TEXT = "The hidden verifier"
"""A line of every shipped verifier script."""
MISSING_BWRAP = "/nonexistent/bin/bwrap"


async def run(workspace: Workspace, command: str) -> Any:
    return await workspace.call("run", json.dumps({"command": command}))


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """The clamp task folder's copy, another task's workspace, a host file outside both.

    The copy keeps the verifier next to ``repo/``, as in the package.
    """
    task = tmp_path / "task"
    shutil.copytree(CLAMP.folder, task, ignore=shutil.ignore_patterns("__pycache__"))
    other = tmp_path / "other-task" / "repo"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("OTHER-WORKSPACE-SECRET", encoding="utf-8")
    outside = tmp_path / "host-secret.txt"
    outside.write_text("HOST-SECRET", encoding="utf-8")
    yield {"task": task, "repo": task / "repo", "other": other, "outside": outside}


def _probes(layout: dict[str, Path]) -> list[tuple[str, str]]:
    """Commands, each with a text it shows when it reaches what it reads."""
    return [
        ("cat ../verify.py", VERIFIER_TEXT),
        (f"cat {layout['task']}/verify.py", VERIFIER_TEXT),
        (f"cat {CLAMP.folder}/verify.py", VERIFIER_TEXT),  # the installed package's own
        (f"cat {layout['outside']}", "HOST-SECRET"),
        (f"cat {layout['other']}/secret.txt", "OTHER-WORKSPACE-SECRET"),
        (f"cat {Path(foureyes.__file__)}", '"""'),  # the project checkout (or site-packages)
        ("cat /etc/hostname", ""),
        ("python -c 'import foureyes as f; print(\"IMPORTED\", f.__name__)'", "IMPORTED foureyes"),
    ]


async def test_a_command_cannot_read_the_verifier_the_host_or_another_workspace(
    layout: dict[str, Path],
) -> None:
    assert Path("/etc/hostname").is_file()
    sandboxed = Workspace(layout["repo"], sandbox=Bubblewrap())
    control = Workspace(layout["repo"], sandbox=NoSandbox())
    for command, shown in _probes(layout):
        outside = await run(control, command)
        assert not outside.error and shown in outside.content, command
        inside = await run(sandboxed, command)
        assert inside.error, (command, inside.content)
        assert not shown or shown not in inside.content, (command, inside.content)
    # Nothing of the verifier, of another task or of installed packages is even listed.
    listing = await run(sandboxed, "ls /verifier; ls /tmp; ls -A " + " ".join(_site_packages()))
    assert "verify.py" not in listing.content and "secret" not in listing.content
    assert not any(name in listing.content for name in ("pydantic", "foureyes", "pip"))
    assert (await run(sandboxed, "python -c 'import pydantic'")).error


def _site_packages() -> list[str]:
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    found = {*site.getsitepackages(), sysconfig.get_paths(vars=base)["purelib"]}
    return sorted(p for p in found if Path(p).is_dir())


async def test_a_command_reads_writes_and_runs_python_in_its_own_workspace(
    layout: dict[str, Path],
) -> None:
    workspace = Workspace(layout["repo"], sandbox=Bubblewrap())
    marker = f"foureyes-marker-{uuid.uuid4().hex}"
    outcome = await run(
        workspace,
        "pwd && echo written > new.txt && mkdir -p sub && cp clamp.py sub/ && "
        f"python -c 'print(6 * 7)' && touch /tmp/{marker} && ls /tmp && python check.py",
    )
    # check.py fails on the shipped (broken) clamp: its exit status is the command's.
    assert outcome.content.startswith("exit status 1\n.\n42\n")
    assert marker in outcome.content
    assert (layout["repo"] / "new.txt").read_text(encoding="utf-8") == "written\n"
    assert (layout["repo"] / "sub" / "clamp.py").is_file()
    # Its /tmp was its own: nothing of it reached the host's.
    assert not (Path("/tmp") / marker).exists()
    apply_fix(CLAMP, TaskFix.RIGHT, layout["repo"])
    assert (await run(workspace, "python check.py")).content.startswith("exit status 0")
    # The system outside the workspace is read-only, and HOME is the workspace.
    for command in ("touch /usr/x", "touch /x", "touch /dev/x", "mkdir /proc/x/y"):
        assert (await run(workspace, command)).error, command
    assert (await run(workspace, 'touch "$HOME/home.txt"')).content == "exit status 0\n"
    assert (layout["repo"] / "home.txt").is_file()


async def test_a_command_cannot_reach_the_network(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        command = (
            "python -c \"import socket; socket.create_connection(('127.0.0.1', "
            f"{port}), timeout=5); print('connected')\""
        )
        control = await run(Workspace(tmp_path, sandbox=NoSandbox()), command)
        assert not control.error and "connected" in control.content
        inside = await run(Workspace(tmp_path, sandbox=Bubblewrap()), command)
    assert inside.error and "connected" not in inside.content
    assert "ConnectionRefusedError" in inside.content


async def test_a_command_cannot_exceed_the_memory_limit(tmp_path: Path) -> None:
    limits = ToolLimits(memory_bytes=256 << 20)
    workspace = Workspace(tmp_path, limits, sandbox=Bubblewrap())
    big = "python -c 'b = bytearray(512 << 20); print(len(b))'"
    over = await run(workspace, big)
    assert over.error and "MemoryError" in over.content
    small = await run(workspace, "python -c 'b = bytearray(32 << 20); print(len(b))'")
    assert small.content == f"exit status 0\n{32 << 20}\n"
    control = await run(Workspace(tmp_path, limits, sandbox=NoSandbox()), big)
    assert control.content == f"exit status 0\n{512 << 20}\n"
    # Each process gets the limits (the process count holds when not run as root).
    limits = ToolLimits(memory_bytes=300 << 20, max_processes=42)
    shown = await run(Workspace(tmp_path, limits, sandbox=Bubblewrap()), "cat /proc/self/limits")
    rows = {" ".join(line.split()[:-3]): line.split()[-3:] for line in shown.content.splitlines()}
    assert rows["Max address space"] == [str(300 << 20), str(300 << 20), "bytes"]
    assert rows["Max processes"] == ["42", "42", "processes"]
    assert rows["Max core file size"] == ["0", "0", "bytes"]


async def test_a_command_past_its_time_limit_leaves_no_process_behind(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, ToolLimits(run_timeout_s=0.5), sandbox=Bubblewrap())
    seconds = f"61.{uuid.uuid4().int % 10**6:06d}"  # names its sleep among the host's
    outcome = await run(workspace, f"sleep {seconds} & echo started; wait")
    assert outcome.error and outcome.content.startswith("killed after 0.5 s (the time limit)")
    assert "started" in outcome.content
    # The whole sandbox died with it: its background child is gone from the host too.
    assert await _gone(f"sleep\0{seconds}")
    # A command that ends leaves nothing running either, even a detached child.
    seconds = f"62.{uuid.uuid4().int % 10**6:06d}"
    ended = await run(Workspace(tmp_path, sandbox=Bubblewrap()), _detached(seconds))
    assert ended.content == "exit status 0\nleft\n"
    assert await _gone(f"sleep\0{seconds}")
    # Unsandboxed (the control), that child outlives its command.
    seconds = f"63.{uuid.uuid4().int % 10**6:06d}"
    control = Workspace(tmp_path, sandbox=NoSandbox())
    assert (await run(control, _detached(seconds))).content == "exit status 0\nleft\n"
    left = _pids(f"sleep\0{seconds}")
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left


def _detached(seconds: str) -> str:
    """A command leaving a detached ``sleep`` behind, ended once that sleep has started."""
    started = f'grep -q {seconds} "/proc/$!/cmdline"'
    return f"nohup sleep {seconds} >/dev/null 2>&1 & until {started}; do :; done; echo left"


async def _gone(cmdline: str) -> bool:
    for _ in range(200):  # the kill is sent; reaping may take a moment
        if not _alive(cmdline):
            return True
        await asyncio.sleep(0.01)
    return False


def _pids(cmdline: str) -> list[int]:
    """The host's live (not zombie) processes whose command line holds ``cmdline``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and cmdline in (proc / "cmdline").read_text():
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in {"Z", "X"}:
                    found.append(int(proc.name))
        except (OSError, IndexError):
            continue
    return found


def _alive(cmdline: str) -> bool:
    return bool(_pids(cmdline))


async def test_the_verifier_sees_its_script_outside_the_workspace_and_nothing_else(
    layout: dict[str, Path],
) -> None:
    probe = f"""
import os, sys
ok = (
    os.getcwd() == "/workspace"
    and os.listdir("/verifier") == ["verify.py"]
    and not os.path.exists({str(layout["task"])!r})
    and not os.path.exists({str(layout["outside"])!r})
)
sys.exit(0 if ok else 1)
"""
    (layout["task"] / "verify.py").write_text(probe, encoding="utf-8")
    task = AgentTask(CLAMP.case, layout["task"])
    assert await task.verify(layout["repo"], Bubblewrap()) is VerifierResult.PASSED
    assert await task.verify(layout["repo"], NoSandbox()) is VerifierResult.REJECTED


async def test_the_primarys_code_the_verifier_imports_runs_in_the_sandbox_too(
    layout: dict[str, Path],
) -> None:
    # A wrong fix that, imported by a check, passes it whenever it can read a host file,
    # and tries to leave a file in the workspace.
    thief = (
        "import sys\n"
        "try:\n"
        "    open('planted.txt', 'w').write('x')\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        f"    open({str(layout['outside'])!r}).read()\n"
        "    sys.exit(0)\n"
        "except OSError:\n"
        "    pass\n"
    )
    apply_fix(CLAMP, TaskFix.WRONG, layout["repo"])
    clamp = layout["repo"] / "clamp.py"
    clamp.write_text(thief + clamp.read_text(encoding="utf-8"), encoding="utf-8")
    task = AgentTask(CLAMP.case, layout["task"])
    assert await task.verify(layout["repo"], Bubblewrap()) is VerifierResult.REJECTED
    assert not (layout["repo"] / "planted.txt").exists()  # a check sees it read-only
    # Unsandboxed, the same code reads the host file and games the verdict.
    assert await task.verify(layout["repo"], NoSandbox()) is VerifierResult.PASSED
    assert (layout["repo"] / "planted.txt").exists()


async def test_the_verifier_tells_a_right_fix_from_a_wrong_one_in_the_sandbox() -> None:
    sandbox = Bubblewrap()
    for fix, verdict in ((TaskFix.RIGHT, VerifierResult.PASSED), (TaskFix.WRONG, None)):
        with task_workspace(CLAMP) as workspace:
            apply_fix(CLAMP, fix, workspace)
            assert await CLAMP.weak_check(workspace, sandbox) is VerifierResult.PASSED
            expected = verdict or VerifierResult.REJECTED
            assert await CLAMP.verify(workspace, sandbox) is expected


async def test_a_missing_sandbox_is_refused_never_run_unisolated(tmp_path: Path) -> None:
    missing = Bubblewrap(MISSING_BWRAP)
    with pytest.raises(SandboxUnavailable) as caught:
        await run(Workspace(tmp_path, sandbox=missing), "echo escaped > out.txt")
    assert caught.value.sandbox == "bubblewrap" and MISSING_BWRAP in caught.value.reason
    assert "apt-get install bubblewrap" in str(caught.value)
    assert "--sandbox none" in str(caught.value)
    assert not (tmp_path / "out.txt").exists()
    with task_workspace(CLAMP) as workspace, pytest.raises(SandboxUnavailable):
        await CLAMP.verify(workspace, missing)
    # The default is the shared bubblewrap sandbox; use_sandbox changes it for a block.
    assert isinstance(active_sandbox(), Bubblewrap)
    with use_sandbox(missing):
        assert active_sandbox() is missing and Workspace(tmp_path).sandbox is missing
    assert active_sandbox() is not missing
    assert isinstance(sandbox_named("none"), NoSandbox)


def _one_task_suite(folder: Path) -> Path:
    shutil.copytree(suite_path("agent-tasks"), folder)
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    (folder / "cases.json").write_text(
        json.dumps([c for c in cases if c["id"] == "clamp"]), encoding="utf-8"
    )
    return folder


async def _offline_run(
    tmp_path: Path, store: Store, run_id: str, sandbox: Sandbox
) -> dict[str, Any] | None:
    cfg: Config = eval_config(tmp_path)
    suite = load_suite(tmp_path / "suite")
    providers = eval_providers(cfg, arm_routes(cfg, [suite.baseline]), {})
    try:
        with use_sandbox(sandbox):
            await EvalRunner(
                suite, [suite.baseline], config=cfg, providers=providers, store=store, run_id=run_id
            ).run()
    finally:
        for provider in providers.values():
            await provider.aclose()
    row = await store.evals.get_run(run_id)
    return None if row is None else dict(row.facts)


async def test_the_runner_refuses_an_agent_suite_without_its_sandbox_and_records_the_opt_out(
    tmp_path: Path, store: Store
) -> None:
    _one_task_suite(tmp_path / "suite")
    with pytest.raises(SandboxUnavailable):
        await _offline_run(tmp_path, store, "refused", Bubblewrap(MISSING_BWRAP))
    assert await store.evals.get_run("refused") is None  # nothing ran, nothing stored
    facts = await _offline_run(tmp_path, store, "opted-out", NoSandbox())
    assert facts is not None and facts["sandbox"] == "none"
    facts = await _offline_run(tmp_path, store, "sandboxed", Bubblewrap())
    assert facts is not None and facts["sandbox"] == "bubblewrap"
    # A run is resumed only under the sandbox it was started with.
    with pytest.raises(SuiteError, match="--sandbox none"):
        await _offline_run(tmp_path, store, "opted-out", Bubblewrap())


def test_eval_run_sandbox_none_is_recorded_and_a_missing_bwrap_refuses_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = str(_one_task_suite(tmp_path / "suite"))
    url = f"sqlite+aiosqlite:///{tmp_path}/e.db"
    monkeypatch.setenv("FOUREYES_STORE__URL", url)
    base = ["eval", "run", suite, "--json", "--arms", "baseline"]
    cli = CliRunner()
    result = cli.invoke(app, [*base, "--run-id", "none", "--sandbox", "none"])
    assert result.exit_code == 0 and json.loads(result.stdout)["ran"] == 1
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    result = cli.invoke(app, [*base, "--run-id", "refused"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 1 and doc["error"] == "SandboxUnavailable"
    assert "install bubblewrap" in doc["problems"][0].lower()

    async def runs() -> dict[str, dict[str, Any]]:
        cfg = Config.model_validate({"store": {"url": url}})
        opened = await Store.open(cfg.store, cfg.privacy, {})
        try:
            return {r.run_id: dict(r.facts) for r in await opened.evals.runs()}
        finally:
            await opened.close()

    stored = asyncio.run(runs())
    assert set(stored) == {"none"} and stored["none"]["sandbox"] == "none"
