"""Starting a command imports what that command needs, not all of foureyes.

Each check runs in a fresh interpreter (this one has imported everything already) and
reads ``sys.modules``: the server, the pipeline, the store and the evals stay out until
a command that uses them is resolved.
"""

from __future__ import annotations

import json
import subprocess
import sys

_HEAVY = [
    "foureyes.guard",
    "foureyes.server",
    "foureyes.pipeline",
    "foureyes.store",
    "foureyes.evals",
]


def _loaded_after(code: str) -> list[str]:
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps(sorted(set({_HEAVY!r}) & set(sys.modules))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_import_foureyes_leaves_the_guard_until_it_is_used() -> None:
    assert _loaded_after("import foureyes") == []
    with_guard = _loaded_after("from foureyes import Guard")
    assert {"foureyes.guard", "foureyes.server", "foureyes.pipeline"} <= set(with_guard)


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
