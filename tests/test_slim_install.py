"""`pip install .` (and `make serve`) bring what `foureyes serve` needs, and no dev or test tool.

The real install is checked by scripts/slim_check.py (wheel, fresh venv, one reply); here,
without a network: pyproject's core dependencies hold no tool of the extras, and every
module of the package imports, and the app builds, in a child interpreter that refuses to
import any package of the ``test`` and ``dev`` extras; and the package setuptools builds
from the tree (what a wheel holds) has every file of the tree the service reads, and
serves from itself alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))

# In the child: a finder that refuses the blocked modules; every module of foureyes (but
# the migrations, which alembic runs, and cli/__main__, which runs the CLI); an `openai`
# route on each transport, built (the SDK and its HTTP clients are imported lazily); and
# the app as `foureyes serve` builds it, answering one chat completion over raw ASGI.
_CHILD = """
import asyncio, importlib, importlib.abc, json, pkgutil, sys

BLOCKED = json.loads(sys.argv[1])

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"blocked for the slim-install test: {name}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
import foureyes
for info in pkgutil.walk_packages(foureyes.__path__, "foureyes."):
    if ".migrations" not in info.name and not info.name.endswith("__main__"):
        importlib.import_module(info.name)
from foureyes.config import Config, load_config
from foureyes.llm.routes import Routes
from foureyes.server.app import create_app

async def transports():
    for transport in ("aiohttp", "httpx", "lean"):
        route = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                 "api_key_env": "K", "transport": transport}
        cfg = Config(routes={"r": route}, roles={"counselor": "r"})
        routes = Routes.build(cfg, {"K": "k"})
        await routes.aclose()

async def one_reply(store_url):
    app = create_app(load_config(environ={"FOUREYES_STORE__URL": store_url}), {})
    body = json.dumps({"model": "foureyes-support",
                       "messages": [{"role": "user", "content": "hello"}]}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/chat/completions",
             "raw_path": b"/v1/chat/completions", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000)}
    sent = []
    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}
    async def send(message):
        sent.append(message)
    async with app.router.lifespan_context(app):
        await app(scope, receive, send)
    status = sent[0]["status"]
    answer = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    return status, answer["foureyes"]["decision"]

asyncio.run(transports())
print(json.dumps(asyncio.run(one_reply(sys.argv[2]))))
"""


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string."""
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found is not None, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def _extras_tools() -> set[str]:
    """Every distribution the test, dev and eval extras name (not foureyes itself)."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    names = {_name(r) for extra in ("test", "dev", "eval") for r in extras.get(extra, [])}
    return names - {"foureyes"}


def _modules_of(distributions: set[str]) -> list[str]:
    """The import names those distributions provide, namespace packages split per owner."""
    owners = metadata.packages_distributions()
    modules: set[str] = set()
    for top, dists in owners.items():
        mine = {_name(d) for d in dists} & distributions
        if not mine:
            continue
        if {_name(d) for d in dists} <= distributions:
            modules.add(top)
            continue
        for dist in mine:  # a shared namespace (opentelemetry): only this one's packages
            for file in metadata.distribution(dist).files or ():
                parts = Path(str(file)).parts
                if len(parts) >= 3 and parts[0] == top and parts[1] != "__pycache__":
                    modules.add(f"{top}.{parts[1]}")
    return sorted(modules)


def test_no_dev_or_test_tool_is_a_core_dependency() -> None:
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert core & _extras_tools() == set()
    assert {"pytest", "ruff", "mypy", "hypothesis", "playwright", "matplotlib"} <= _extras_tools()
    assert "foureyes[test]" in PYPROJECT["project"]["optional-dependencies"]["dev"]


def test_every_module_and_the_app_need_only_the_core_dependencies(tmp_path: Path) -> None:
    blocked = _modules_of(_extras_tools())
    assert {"pytest", "_pytest", "hypothesis", "opentelemetry.sdk", "matplotlib"} <= set(blocked)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(blocked), f"sqlite+aiosqlite:///{tmp_path}/s.db"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout) == [200, "released"]


def _make_dry_run(target: str, venv: Path) -> list[str]:
    """The commands ``make TARGET`` would run from scratch (``-n -B``: nothing is run)."""
    done = subprocess.run(
        ["make", "-n", "-B", target, f"VENV={venv}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if " install " in line]


def test_make_serve_installs_the_slim_set_and_make_test_the_dev_tools(tmp_path: Path) -> None:
    (serve,) = _make_dry_run("serve", tmp_path / "venv")
    assert serve.endswith("install --quiet --disable-pip-version-check -e .")
    (dev,) = _make_dry_run("install", tmp_path / "venv")
    assert dev.endswith('-e ".[dev]"')


# --- the built package ----------------------------------------------------------------------

# Files of the tree that are not in the built package, and why.
NOT_PACKAGED = {
    # alembic's template for writing a new revision (`alembic revision`), a development
    # step; upgrading the store runs the revisions themselves.
    "foureyes/store/migrations/script.py.mako",
}
# What `foureyes serve` reads at run time besides its modules, by folder.
SERVICE_DATA = {
    "foureyes/server/console/templates": {"console.html"},
    "foureyes/server/console/static": {"console.css", "console.js"},
    "foureyes/server/console": {"strings.json"},
    "foureyes/risk/lexicon": {"en.txt", "zh.txt", "zh_traditional.txt", "zh_variants.txt"},
    "foureyes/risk/data": {"resources.json", "screen_manifest.json", "screen_weights.json"},
    "foureyes/gate/prompts": {"counselor_system.txt", "supervisor_system.txt"},
    "foureyes/llm/offline_templates": {"counselor.json"},
    "foureyes/store/migrations": {"env.py"},
}

# In the child, with only the built package (and the main venv's dependencies) importable:
# the package's own files and metadata, the app opening a new store (its migrations), the
# console page and its static files, and one chat completion over raw ASGI.
_BUILT_CHILD = """
import asyncio, importlib.metadata, json, sys
import foureyes

async def call(app, method, path, body=b""):
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000)}
    sent = []
    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}
    async def send(message):
        sent.append(message)
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

async def main(store_url):
    from foureyes.config import load_config
    from foureyes.server.app import create_app
    app = create_app(load_config(environ={"FOUREYES_STORE__URL": store_url}), {})
    body = json.dumps({"model": "foureyes-support",
                       "messages": [{"role": "user", "content": "hello"}]}).encode()
    async with app.router.lifespan_context(app):
        page = await call(app, "GET", "/console")
        script = await call(app, "GET", "/console/static/console.js")
        reply = await call(app, "POST", "/v1/chat/completions", body)
    dist = importlib.metadata.distribution("foureyes")
    groups = {}
    for ep in dist.entry_points:
        groups.setdefault(ep.group, []).append(ep.name)
    return {
        "file": foureyes.__file__,
        "metadata": str(dist.locate_file("")),
        "entry_points": groups,
        "page": [page[0], b"<html" in page[1].lower()],
        "script": [script[0], len(script[1]) > 0],
        "reply": [reply[0], json.loads(reply[1])["foureyes"]["decision"]],
    }

print(json.dumps(asyncio.run(main(sys.argv[1]))))
"""


def _build(tree: Path, out: Path) -> None:
    """Build the package with setuptools from ``tree``, into ``out``: what a wheel holds.

    ``build_py`` picks the modules and the package data, as ``bdist_wheel`` does before it
    zips them; ``egg_info`` writes the metadata (entry points included). Both are the
    venv's own setuptools, offline. (A wheel itself needs ``bdist_wheel``, which the venv's
    setuptools has only with the ``wheel`` package or from version 70.1.)
    """
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            "from setuptools import setup; setup()",
            "-q",
            "build_py",
            "--build-lib",
            str(out),
            "egg_info",
            "--egg-base",
            str(out),
        ],
        cwd=tree,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _files(root: Path) -> set[str]:
    return {
        path.relative_to(root).as_posix()
        for path in (root / "foureyes").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_the_built_package_holds_every_file_the_service_reads(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(
        REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, tree / name)
    out = tmp_path / "built"
    _build(tree, out)

    built, source = _files(out), _files(tree / "src")
    assert built == source - NOT_PACKAGED
    assert NOT_PACKAGED <= source
    for folder, names in SERVICE_DATA.items():
        assert {f"{folder}/{n}" for n in names} <= built, folder
    assert any(f.startswith("foureyes/store/migrations/versions/") for f in built)

    child = subprocess.run(
        [sys.executable, "-c", _BUILT_CHILD, f"sqlite+aiosqlite:///{tmp_path}/s.db"],
        env={k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
        | {"PYTHONPATH": str(out)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    found = json.loads(child.stdout)
    assert Path(found["file"]).is_relative_to(out)
    assert Path(found["metadata"]).resolve() == out.resolve()
    project = PYPROJECT["project"]["entry-points"]
    for group, entries in project.items():
        assert sorted(found["entry_points"][group]) == sorted(entries), group
    assert found["entry_points"]["console_scripts"] == ["foureyes"]
    assert found["page"] == [200, True]
    assert found["script"] == [200, True]
    assert found["reply"] == [200, "released"]
