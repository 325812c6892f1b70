"""A serving process settles the garbage collector once its app has started; others do not.

The collector's settings belong to the whole process, so each case runs in one of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from foureyes.server.app import YOUNG_GENERATION_THRESHOLD

_STARTED = """
import asyncio, gc, json, os, sys
from foureyes.config import Config, StoreConfig
from foureyes.cli import serve_cmd
from foureyes.server.app import create_app

config = Config(store=StoreConfig(url="sqlite+aiosqlite:///" + sys.argv[2]))
before = {"threshold": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}
if sys.argv[1] == "worker":  # as a `serve --workers` process builds its app
    os.environ["_FOUREYES_WORKER_CONFIG"] = config.model_dump_json()
    app = serve_cmd.worker_app()
else:
    app = create_app(config, {})

async def start_and_stop():
    async with app.router.lifespan_context(app):
        return {"threshold": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}

print(json.dumps({"before": before, "started": asyncio.run(start_and_stop())}))
"""


def _collector(how: str, tmp_path: Path) -> dict[str, dict[str, int]]:
    done = subprocess.run(
        [sys.executable, "-c", _STARTED, how, str(tmp_path / "store.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, dict[str, int]] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_serve_worker_freezes_what_start_up_loaded_and_collects_young_objects_less_often(
    tmp_path: Path,
) -> None:
    result = _collector("worker", tmp_path)
    assert result["before"] == {"threshold": 700, "frozen": 0}
    assert result["started"]["threshold"] == YOUNG_GENERATION_THRESHOLD
    # Start-up's objects (libraries, app, config) are out of the collector's reach.
    assert result["started"]["frozen"] > 10_000


def test_an_app_in_someone_elses_process_leaves_the_collector_alone(tmp_path: Path) -> None:
    result = _collector("mounted", tmp_path)
    assert result["started"] == result["before"] == {"threshold": 700, "frozen": 0}
