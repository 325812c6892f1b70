"""`foureyes serve` as a real process on loopback, reached with the official openai SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import openai

from foureyes.cli.serve_cmd import no_region_note
from foureyes.risk.resources import default_registry
from tests.helpers.postgres import free_port
from tests.helpers.resources import resource_entry
from tests.helpers.server import RunningServer, start_serve_process, stop_process

FOUREYES = [sys.executable, "-m", "foureyes.cli"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"
    return env | extra


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_serve_with_no_config_answers_healthz_offline_and_sqlite(
    offline_serve: RunningServer,
) -> None:
    status, body = _get(offline_serve.url + "/healthz")
    assert status == 200
    assert body["status"] == "ok" and body["store"] == "sqlite"
    assert set(body["offline_roles"]) == {  # type: ignore[arg-type]
        "counselor",
        "supervisor",
        "risk_l1",
        "risk_l2",
        "reviewer",
        "selector",
        "primary",
    }
    assert offline_serve.folder is not None and (offline_serve.folder / "serve.db").exists()


async def test_models_are_listed_for_the_openai_sdk(offline_serve: RunningServer) -> None:
    async with openai.AsyncOpenAI(base_url=offline_serve.base_url, api_key="unused") as client:
        models = await client.models.list()
    assert [m.id for m in models.data] == ["foureyes-support"]


def test_serve_refuses_to_start_without_its_key_variable(tmp_path: Path) -> None:
    config = tmp_path / "f.toml"
    config.write_text(
        '[routes.flash]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "m"\napi_key_env = "FLASH_API_KEY"\n[roles]\ncounselor = "flash"\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [*FOUREYES, "serve", "--config", str(config), "--json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert json.loads(result.stdout)["problems"] == [
        "environment variable FLASH_API_KEY is not set"
    ]


def test_serve_exits_non_zero_when_the_store_is_down(tmp_path: Path) -> None:
    down = f"postgresql+asyncpg://fy:pw@127.0.0.1:{free_port()}/x"
    result = subprocess.run(
        [*FOUREYES, "serve", "--port", str(free_port())],
        env=_env(tmp_path, FOUREYES_STORE__URL=down, FOUREYES_STORE__TIMEOUT_S="2"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "StoreError" in result.stderr
    assert "Traceback" not in result.stderr
    assert "pw@" not in result.stderr + result.stdout


UNREVIEWED = (
    '[routes.flash]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    '[roles]\ncounselor = "flash"\n'
)


def test_serve_refuses_a_model_counselor_that_no_second_model_reviews(tmp_path: Path) -> None:
    config = tmp_path / "f.toml"
    config.write_text(UNREVIEWED, encoding="utf-8")
    result = subprocess.run(
        [*FOUREYES, "serve", "--config", str(config), "--port", str(free_port()), "--json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem.startswith("roles.supervisor is not mapped to a model")
    assert not (tmp_path / "serve.db").exists()


def test_serve_starts_when_the_config_says_no_second_model_reviews(tmp_path: Path) -> None:
    config = tmp_path / "f.toml"
    config.write_text(UNREVIEWED + "[gate]\nsupervisor_unreviewed = true\n", encoding="utf-8")
    server = start_serve_process(["--config", str(config)], env=_env(tmp_path), cwd=tmp_path)
    assert server.process is not None
    try:
        status, body = _get(server.url + "/healthz")
    finally:
        stop_process(server.process)
    assert status == 200 and "supervisor" in body["offline_roles"]  # type: ignore[operator]
    assert "counselor" not in body["offline_roles"]  # type: ignore[operator]


PORTUGAL = {"en": "Portugal", "zh-Hans": "葡萄牙", "zh-Hant": "葡萄牙"}


def _registry_config(tmp_path: Path, mode: str, region: str | None = None) -> Path:
    line = resource_entry(id="pt-test", region="PT", numbers=["213 544 545"])
    registry = tmp_path / "resources.json"
    registry.write_text(json.dumps({"regions": {"PT": PORTUGAL}, "entries": [line]}), "utf-8")
    config = tmp_path / "f.toml"
    gate = "" if region is None else f'[gate]\nregion = "{region}"\n'
    config.write_text(
        f'{gate}[risk]\nresources_file = "{registry}"\nresources_mode = "{mode}"\n', "utf-8"
    )
    return config


def _started_output(tmp_path: Path, *args: str) -> str:
    server = start_serve_process(list(args), env=_env(tmp_path), cwd=tmp_path)
    assert server.process is not None
    return stop_process(server.process)


def test_serve_with_no_region_names_the_regions_its_registry_serves(tmp_path: Path) -> None:
    output = _started_output(tmp_path, "--config", str(_registry_config(tmp_path, "extend")))
    [note] = [line for line in output.splitlines() if "gate.region is not set" in line]
    served = sorted({*default_registry().served_regions(), "PT"})
    assert note.endswith(f"the crisis-resource registry has lines for {', '.join(served)})")


def test_serve_json_names_the_served_regions_of_a_replacing_registry(tmp_path: Path) -> None:
    config = _registry_config(tmp_path, "replace")
    output = _started_output(tmp_path, "--config", str(config), "--json")
    notes = [json.loads(line) for line in output.splitlines() if line.startswith('{"warning"')]
    assert {"warning": "no_region", "served_regions": ["PT"]} in notes


def test_serve_with_a_region_says_nothing_of_regions(tmp_path: Path) -> None:
    output = _started_output(tmp_path, "--config", str(_registry_config(tmp_path, "extend", "PT")))
    assert "gate.region is not set" not in output and "has lines for" not in output


def test_the_no_region_note_lists_the_served_regions_or_says_there_are_none() -> None:
    assert no_region_note(("CN", "HK")).endswith("registry has lines for CN, HK)")
    assert no_region_note(()).endswith("registry has lines for none)")
    assert 'region = "CN"' in no_region_note(("CN",))
