"""``foureyes eval``: list the shipped suites, run a suite under arms, report a run."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from foureyes.cli._common import (
    ConfigOption,
    JsonOption,
    console,
    emit_json,
    err_console,
    fail,
    load,
    run,
)
from foureyes.config import Config
from foureyes.core.datadir import DATA_DIR_ENV, data_dir
from foureyes.core.errors import FoureyesError, UsageError
from foureyes.core.locale import Locale
from foureyes.evals import (
    EvalRunner,
    PairDone,
    RunSummary,
    SuiteError,
    arm_routes,
    eval_providers,
    load_suite,
    runnable_arms,
    shipped_suites,
    suite_path,
    write_report,
)
from foureyes.evals.agent_tasks import agent_task
from foureyes.evals.report import ReportFiles
from foureyes.evals.runner import new_run_id
from foureyes.evals.sandbox import SandboxName, sandbox_named, use_sandbox
from foureyes.evals.scripted import SCRIPTED_MODE, needs_script, scripted_config, scripted_scenario
from foureyes.evals.suite import SuiteKind
from foureyes.store import Store

app = typer.Typer(no_args_is_help=True, help="Paired-arm evaluation: suites, runs, reports.")


def _loud(error: UsageError | OSError, *, as_json: bool) -> NoReturn:
    # A cassette miss is a UsageError, not a FoureyesError, on purpose (the gate would
    # swallow a FoureyesError as a reason code); here it fails the command like one.
    fail(FoureyesError(f"{type(error).__name__}: {error}"), as_json=as_json)


@app.command("list")
def list_suites(as_json: JsonOption = False) -> None:
    """List the shipped suites with their arms and case counts."""
    documents: list[dict[str, Any]] = []
    for name, path in shipped_suites().items():
        try:
            suite = load_suite(path)
        except SuiteError as exc:
            fail(exc, as_json=as_json)
        documents.append(
            {
                "name": name,
                "kind": suite.kind.value,
                "description": suite.description,
                "cases": len(suite.cases),
                "labels": list(suite.labels),
                "arms": [
                    {"name": a.name, "baseline": a.baseline, "description": a.description}
                    for a in suite.arms
                ],
            }
        )
    if as_json:
        emit_json({"ok": True, "suites": documents})
        return
    for doc in documents:
        arms = ", ".join(a["name"] + (" (baseline)" if a["baseline"] else "") for a in doc["arms"])
        console.print(f"[bold]{doc['name']}[/] ({doc['kind']}, {doc['cases']} cases): {arms}")


async def _run(
    cfg: Config,
    suite_name: str,
    arm_names: list[str] | None,
    *,
    run_id: str,
    concurrency: int,
    pair_deadline_s: float,
    review_deadline_s: float,
    samples: int,
    seed: int,
    record: Path | None,
    replay: Path | None,
    data_root: Path,
    show_progress: bool,
    sandbox: SandboxName = SandboxName.BUBBLEWRAP,
    scripted: bool = False,
) -> tuple[RunSummary, dict[str, str]]:
    suite = load_suite(suite_path(suite_name))
    if suite.kind is SuiteKind.AGENT and replay is None and needs_script(cfg):
        # No model for the Primary: the scripted offline run, through an in-process
        # simulator on loopback (foureyes.evals.scripted); its mode says so in the report.
        from foureyes.llm.simulate import Simulator, listen, parse_scenario, serving

        scenario, _ = scripted_scenario([agent_task(suite, c) for c in suite.cases])
        sock = listen("127.0.0.1", 0)
        async with serving(Simulator(parse_scenario(scenario)), sock):
            url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
            return await _run(
                scripted_config(cfg, url),
                suite_name,
                arm_names,
                run_id=run_id,
                concurrency=concurrency,
                pair_deadline_s=pair_deadline_s,
                review_deadline_s=review_deadline_s,
                samples=samples,
                seed=seed,
                record=record,
                replay=replay,
                data_root=data_root,
                show_progress=show_progress,
                sandbox=sandbox,
                scripted=True,
            )
    left_out: dict[str, str] = {}
    if arm_names:
        arms = [suite.arm(n) for n in arm_names]
    else:
        # By default, the arms this config's routes can run; the others are named.
        arms, left_out = runnable_arms(cfg, suite.arms)
        if suite.baseline.name in left_out:
            raise SuiteError([f"arm {name}: {why}" for name, why in left_out.items()])
    routes = arm_routes(cfg, arms)
    providers = eval_providers(cfg, routes, os.environ, record=record, replay=replay)
    mode = "replay" if replay else "record" if record else "live"
    if scripted:
        mode = SCRIPTED_MODE if record is None else f"{SCRIPTED_MODE}+record"
    store = await Store.open(cfg.store, cfg.privacy, os.environ)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("failures {task.fields[failures]}  spend ${task.fields[spend]:.4f}"),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress,
    )
    total = len(arms) * len(suite.cases) * samples
    task = progress.add_task(suite.name, total=total, failures=0, spend=0.0)

    def advance(done: PairDone) -> None:
        progress.update(task, completed=done.done, failures=done.failures, spend=done.spend_usd)

    try:
        with progress:
            runner = EvalRunner(
                suite,
                arms,
                config=cfg,
                providers=providers,
                store=store,
                run_id=run_id,
                concurrency=concurrency,
                pair_deadline_s=pair_deadline_s,
                review_deadline_s=review_deadline_s,
                samples=samples,
                seed=seed,
                mode=mode,
                data_root=data_root,
                on_progress=advance,
            )
            # An agent suite's Primary commands and verifiers run in it (recorded).
            with use_sandbox(sandbox_named(sandbox)):
                return await runner.run(), left_out
    finally:
        for provider in providers.values():
            await provider.aclose()
        await store.close()


@app.command("run")
def run_suite(
    suite: Annotated[str, typer.Argument(help="A shipped suite's name, or a suite folder.")],
    arms: Annotated[
        str | None,
        typer.Option(
            "--arms",
            help="Comma-separated arm names (default: every arm the config's routes can run).",
        ),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Resume this run (default: a new run).")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Pairs in flight.")] = 4,
    pair_deadline: Annotated[
        float,
        typer.Option(
            "--pair-deadline",
            min=0.1,
            help="Seconds one pair may take (agent suites: the Primary's deadline, in the "
            "shared prefix and again after the review; fits a thinking model on 30 steps).",
        ),
    ] = 1800.0,
    review_deadline: Annotated[
        float,
        typer.Option(
            "--review-deadline",
            min=0.1,
            help="Agent suites: seconds a review may take (later: that arm's timeout).",
        ),
    ] = 300.0,
    samples: Annotated[
        int,
        typer.Option(
            min=1, max=100, help="Agent suites: runs per case, each forked into every arm."
        ),
    ] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the run's statistics.")] = 0,
    record: Annotated[
        Path | None, typer.Option(help="Record every model exchange into this cassette.")
    ] = None,
    replay: Annotated[
        Path | None, typer.Option(help="Answer from this cassette instead of the network.")
    ] = None,
    data_root: Annotated[
        Path | None,
        typer.Option(
            "--data-root",
            file_okay=False,
            help="Folder that review cases' sessions are under (default: trajectories/ in "
            f"${DATA_DIR_ENV}, else ../shared/data/trajectories from the checkout).",
        ),
    ] = None,
    sandbox: Annotated[
        SandboxName,
        typer.Option(
            help="Agent suites: where the Primary's commands and the verifiers run "
            "(none: unisolated, recorded with the run)."
        ),
    ] = SandboxName.BUBBLEWRAP,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run every case of SUITE under every chosen arm; stored as each pair finishes.

    Without --arms, an arm whose route the config does not define (supervisor-strong
    without a strong route) is left out and named; a named arm whose route is missing, or
    a baseline that cannot run, exits 1 before any case runs. So does an agent suite when
    its bubblewrap sandbox cannot be set up, unless --sandbox none.
    """
    cfg = load(config, as_json=as_json)
    rid = new_run_id(Path(suite).name, dt.datetime.now(dt.UTC)) if run_id is None else run_id
    names = [n.strip() for n in arms.split(",") if n.strip()] if arms else None
    try:
        summary, left_out = run(
            _run(
                cfg,
                suite,
                names,
                run_id=rid,
                concurrency=concurrency,
                pair_deadline_s=pair_deadline,
                review_deadline_s=review_deadline,
                samples=samples,
                seed=seed,
                record=record,
                replay=replay,
                data_root=data_root or data_dir() / "trajectories",
                show_progress=not as_json,
                sandbox=sandbox,
            )
        )
    except FoureyesError as exc:
        fail(exc, as_json=as_json)
    except (UsageError, OSError) as exc:
        _loud(exc, as_json=as_json)
    document = {
        "ok": True,
        "run_id": summary.run_id,
        "ran": summary.ran,
        "skipped": summary.skipped,
        "failures": summary.failures,
        "spend_usd": summary.spend_usd,
        "arms_left_out": left_out,
    }
    if as_json:
        emit_json(document)
        return
    for name, why in left_out.items():
        err_console.print(
            f"left out arm {name}: {why} (define the route, or choose arms with --arms)",
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        f"run [bold]{summary.run_id}[/]: ran {summary.ran}, skipped {summary.skipped}, "
        f"failures {summary.failures}, spend ${summary.spend_usd:.4f}"
    )
    console.print(f"report: foureyes eval report {summary.run_id}")


async def _report(cfg: Config, run_id: str, out: Path, locale: Locale) -> ReportFiles:
    store = await Store.open(cfg.store, cfg.privacy, os.environ)
    try:
        return await write_report(store, run_id, out, locale=locale)
    finally:
        await store.close()


@app.command("report")
def report(
    run_id: Annotated[str, typer.Argument(help="The run to report.")],
    out: Annotated[
        Path, typer.Option("--out", file_okay=False, help="Folder to write the report into.")
    ] = Path("eval-reports"),
    locale: Annotated[Locale, typer.Option(help="Language of the report.")] = Locale.EN,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write RUN's self-contained HTML page and Markdown summary."""
    cfg = load(config, as_json=as_json)
    try:
        files = run(_report(cfg, run_id, out, locale))
    except FoureyesError as exc:
        fail(exc, as_json=as_json)
    except (UsageError, OSError) as exc:
        _loud(exc, as_json=as_json)
    if as_json:
        emit_json(
            {
                "ok": True,
                "html": str(files.html),
                "markdown": str(files.markdown),
                "plots_note": files.plots_note,
            }
        )
        return
    console.print(f"wrote {files.html} and {files.markdown}")
    if files.plots_note is not None:
        err_console.print(files.plots_note, markup=False, highlight=False)
