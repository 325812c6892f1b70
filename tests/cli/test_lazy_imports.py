"""Starting a command imports what that command needs, not all of foureyes.

Each check runs in a fresh interpreter (this one has imported everything already) and
reads ``sys.modules``: the server, the pipeline, the store and the evals stay out until
a command that uses them is resolved, and the library loads no web framework at all
(issue 38: the CPU of starting is measured by benchmarks/cli_startup.py; these are its
module sets, which a test can hold without timing anything).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_HEAVY = [
    "foureyes.guard",
    "foureyes.server",
    "foureyes.pipeline",
    "foureyes.store",
    "foureyes.evals",
]
# What the library must never load: the HTTP stack (the server's alone) and the plots.
_WEB = ["fastapi", "starlette", "uvicorn", "sse_starlette", "httptools", "matplotlib"]


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """Every module ``code`` leaves in ``sys.modules`` of a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _loaded_after(code: str) -> list[str]:
    return sorted(set(_HEAVY) & _modules_after(code))


def _packages(modules: set[str], names: list[str]) -> list[str]:
    """The ``names`` (top-level packages) that any of ``modules`` belongs to."""
    return sorted({m.split(".")[0] for m in modules} & set(names))


def test_import_foureyes_leaves_the_guard_until_it_is_used() -> None:
    assert _loaded_after("import foureyes") == []
    with_guard = _loaded_after("from foureyes import Guard")
    assert {"foureyes.guard", "foureyes.pipeline", "foureyes.store"} <= set(with_guard)


def test_import_foureyes_loads_none_of_foureyes_but_its_own_init() -> None:
    modules = _modules_after("import foureyes")
    assert sorted(m for m in modules if m.startswith("foureyes")) == ["foureyes"]
    assert _packages(modules, [*_WEB, "sqlalchemy", "pydantic", "pydantic_settings"]) == []


def test_the_guard_and_the_wire_layer_load_no_web_framework() -> None:
    with_guard = _modules_after("from foureyes import Guard, SyncGuard")
    assert _packages(with_guard, _WEB) == []
    assert "foureyes.wire" in with_guard
    assert not any(m.startswith("foureyes.server") for m in with_guard)
    # The library's integrations import the wire's names, not the server's.
    assert _packages(_modules_after("import foureyes.wire"), _WEB) == []


def test_the_server_still_loads_the_framework_it_speaks() -> None:
    # The probe sees a framework where there is one: the checks above can fail.
    server = _modules_after("import foureyes.server")
    assert {"fastapi", "starlette"} <= set(_packages(server, _WEB))


def test_help_imports_no_command_module() -> None:
    listing = (
        "from typer.testing import CliRunner\nfrom foureyes.cli import app\n"
        "result = CliRunner().invoke(app, ['--help'])\n"
        "assert result.exit_code == 0 and 'trace' in result.output, result.output"
    )
    ours = sorted(m for m in _modules_after(listing) if m.startswith("foureyes"))
    assert ours == ["foureyes", "foureyes.cli", "foureyes.cli.main"]


def test_trace_list_imports_the_config_and_the_store_alone(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{tmp_path / 'foureyes.db'}"
    listing = (
        "from typer.testing import CliRunner\nfrom foureyes.cli import app\n"
        "result = CliRunner().invoke(app, ['trace', 'list'])\n"
        "assert result.exit_code == 0 and 'no runs match' in result.output, result.output"
    )
    modules = _modules_after(listing, env)
    packages = {".".join(m.split(".")[:2]) for m in modules if m.startswith("foureyes.")}
    assert packages == {"foureyes.cli", "foureyes.config", "foureyes.core", "foureyes.store"}
    assert sorted(m for m in modules if m.startswith("foureyes.cli.")) == [
        "foureyes.cli._common",
        "foureyes.cli.main",
        "foureyes.cli.trace_cmd",
    ]
    assert _packages(modules, [*_WEB, "numpy"]) == []
    assert "rich.table" not in modules


def test_the_cli_imports_only_the_command_it_runs() -> None:
    assert _loaded_after("from foureyes.cli import app, main") == []
    resolve = (
        "import typer\nfrom foureyes.cli import app\n"
        "group = typer.main.get_command(app)\n"
        "assert group.get_command(None, {!r}) is not None"
    )
    assert _loaded_after(resolve.format("simulate")) == []
    assert "foureyes.evals" in _loaded_after(resolve.format("eval"))


def test_from_foureyes_import_guard_is_the_guard_class() -> None:
    import foureyes
    from foureyes.guard import Guard, SyncGuard

    assert foureyes.Guard is Guard and foureyes.SyncGuard is SyncGuard
    assert {"Guard", "SyncGuard"} <= set(dir(foureyes))


# What `foureyes --help` and `trace list` on an SQLite store at head must not load: the
# PostgreSQL dialect and driver, Alembic (and its Mako and Pygments), the web stack,
# pydantic-settings, cryptography (the unknowns' seal), and the store's record keepers a
# run list does not use (issue 38 item 5; benchmarks/cli_startup.py measures the CPU).
_NOT_FOR_A_LISTING = [
    "sqlalchemy.dialects.postgresql",
    "asyncpg",
    "alembic",
    "mako",
    "pygments",
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic_settings",
    "cryptography",
    "foureyes.store.alerts",
    "foureyes.store.api_keys",
    "foureyes.store.assessments",
    "foureyes.store.evals",
    "foureyes.store.ledger",
    "foureyes.store.observations",
    "foureyes.store.rate_limits",
]


# Opening the store: the async engine, its driver and the event loop; a run list on an
# SQLite file at head needs none of them (foureyes.store.sqlite_read).
_ASYNC_ENGINE = [
    "aiosqlite",
    "foureyes.store._database",
    "foureyes.store.engine",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.orm",
]


def _command_modules(args: list[str], env: dict[str, str]) -> set[str]:
    """The modules of ``foureyes ARGS`` run as the console script runs it (``main()``)."""
    run = (
        f"import sys\nsys.argv = ['foureyes', *{args!r}]\nfrom foureyes.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code"
    )
    return _modules_after(run, env)


def _loaded(modules: set[str], names: list[str]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def _sqlite_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{tmp_path / 'foureyes.db'}"
    return env


def test_help_loads_no_store_migration_or_web_stack(tmp_path: Path) -> None:
    modules = _command_modules(["--help"], _sqlite_env(tmp_path))
    assert _loaded(modules, [*_NOT_FOR_A_LISTING, "sqlalchemy", "aiosqlite"]) == []


def test_trace_list_on_sqlite_at_head_loads_no_postgresql_alembic_or_web_stack(
    tmp_path: Path,
) -> None:
    env = _sqlite_env(tmp_path)
    # The first run creates the file and migrates it through Store.open: Alembic and the
    # async engine are loaded then, which shows the probe sees them when they are there.
    first = _command_modules(["trace", "list"], env)
    assert "alembic" in _loaded(first, _NOT_FOR_A_LISTING)
    assert _loaded(first, _ASYNC_ENGINE) == _ASYNC_ENGINE
    # Every later run finds the store at head by plain queries and reads it directly.
    again = _command_modules(["trace", "list"], env)
    assert _loaded(again, [*_NOT_FOR_A_LISTING, *_ASYNC_ENGINE]) == []
    assert {"sqlalchemy.dialects.sqlite", "foureyes.store.sqlite_read"} <= again


def test_loading_a_command_leaves_the_collector_as_it_found_it() -> None:
    import gc

    import typer

    from foureyes.cli import app

    group = typer.main.get_command(app)
    assert gc.isenabled()
    assert group.get_command(typer.Context(group), "store") is not None
    assert gc.isenabled()  # paused while the module imported, then on again
    gc.disable()
    try:
        assert group.get_command(typer.Context(group), "keys") is not None
        assert not gc.isenabled()  # a host that disabled it keeps it disabled
    finally:
        gc.enable()


def test_the_command_line_freezes_what_it_loaded_when_it_ends(tmp_path: Path) -> None:
    # The shutdown collections then skip every object loaded (benchmarks/README.md,
    # "Starting the command line"); before main() nothing is frozen.
    probe = (
        "import gc, sys\nsys.argv = ['foureyes', '--help']\nfrom foureyes.cli import main\n"
        "before = gc.get_freeze_count()\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(before, gc.get_freeze_count() > 10000)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=_sqlite_env(tmp_path),
    )
    assert done.stdout.splitlines()[-1] == "0 True"
