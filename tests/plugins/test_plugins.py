"""Plugins from real installed distributions: a ``*.dist-info`` on ``sys.path`` of a subprocess.

Each test writes a tiny distribution (METADATA, entry_points.txt and its module) into a
directory that ``PYTHONPATH`` puts first, so ``importlib.metadata`` finds it exactly as it
finds one ``pip`` installed; ``foureyes`` then runs as its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai

import foureyes
from foureyes.gate.rules import BUILTIN_RULES
from tests.helpers.server import start_serve_process, stop_process

FOUREYES = [sys.executable, "-m", "foureyes.cli"]

ACME_KIND = '''
from foureyes.llm.offline import OfflineProvider


class LoggingProvider:
    """The offline engine behind a third-party kind, logging each call to $ACME_LOG."""

    def __init__(self, name, log):
        self.route = name
        self._inner = OfflineProvider(name)
        self._log = log

    async def complete(self, request, *, timeout_s):
        with open(self._log, "a", encoding="utf-8") as log:
            log.write(f"{self.route} {request.role}\\n")
        return await self._inner.complete(request, timeout_s=timeout_s)

    async def aclose(self):
        await self._inner.aclose()


def build(name, route, environ):
    return LoggingProvider(name, environ["ACME_LOG"])


def build_failing(name, route, environ):
    raise RuntimeError("acme endpoint not configured")


def build_nothing(name, route, environ):
    return None


def two_arguments(name, route):
    return LoggingProvider(name, "unused")
'''

ACME_RULE = """
from foureyes.core.locale import Locale
from foureyes.gate import Rule, RuleFinding


def _check(candidate):
    # Fires on any reply with a visible character: every offline template has one.
    if candidate.folded.text.strip():
        yield RuleFinding("acme_rule", (0, len(candidate.text)), "acme forbids replies")


ACME_RULE = Rule(
    "acme_rule",
    {Locale.EN: "Says anything.", Locale.ZH_HANS: "说了任何话。", Locale.ZH_HANT: "說了任何話。"},
    check=_check,
)
NOT_A_RULE = "acme_rule"
CLASHING = Rule(
    "too_long",
    {Locale.EN: "Mine.", Locale.ZH_HANS: "我的。", Locale.ZH_HANT: "我的。"},
)
"""

ACME_ROUTE = """
[routes.acme]
kind = "acme"
model = "acme-1"

[roles]
counselor = "acme"
supervisor = "acme"
"""


def distribution(root: Path, entry_points: dict[str, dict[str, str]], **modules: str) -> Path:
    """Write distribution ``acme-plugin`` 1.0 (its modules and metadata) under ``root``."""
    info = root / "acme_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-plugin\nVersion: 1.0\n", encoding="utf-8"
    )
    lines = []
    for group, entries in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {value}" for name, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for module, code in modules.items():
        (root / f"{module}.py").write_text(code, encoding="utf-8")
    return root


def env_with(tmp_path: Path, plugin_root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env["FOUREYES_STORE__URL"] = f"sqlite+aiosqlite:///{tmp_path / 'plugins.db'}"
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_root), env.get("PYTHONPATH", "")])
    env["ACME_LOG"] = str(tmp_path / "acme.log")
    return env


def config_check(
    tmp_path: Path, plugin_root: Path, config: str | None = None, **environ: str
) -> Any:
    args = [*FOUREYES, "config", "check", "--json"]
    if config is not None:
        path = tmp_path / "foureyes.toml"
        path.write_text(config, encoding="utf-8")
        args += ["--config", str(path)]
    env = env_with(tmp_path, plugin_root) | environ
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    body = json.loads(result.stdout)
    assert (result.returncode == 0) == body["ok"], result
    return body


def test_config_check_lists_builtins_and_a_third_party_kind_and_rule(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {
            "foureyes.route_kinds": {"acme": "acme_kind:build"},
            "foureyes.rules": {"acme_rule": "acme_rules:ACME_RULE"},
        },
        acme_kind=ACME_KIND,
        acme_rules=ACME_RULE,
    )

    body = config_check(tmp_path, root, ACME_ROUTE)

    assert body["ok"] is True, body
    kinds = {k["name"]: k for k in body["plugins"]["route_kinds"]}
    assert set(kinds) == {"acme", "offline", "openai"}
    assert kinds["acme"] == {
        "name": "acme",
        "value": "acme_kind:build",
        "distribution": "acme-plugin",
        "version": "1.0",
    }
    assert kinds["openai"]["distribution"] == kinds["offline"]["distribution"] == "foureyes"
    rules = [(r["name"], r["distribution"]) for r in body["plugins"]["rules"]]
    # The built-ins come first, in catalogue order, then third-party rules.
    assert rules[0] == ("empty_text", "foureyes") and rules[-1] == ("acme_rule", "acme-plugin")
    assert len(rules) == len(BUILTIN_RULES) + 1


def test_a_kind_no_plugin_provides_fails_with_the_known_kinds(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {"foureyes.route_kinds": {"acme": "acme_kind:build"}},
        acme_kind=ACME_KIND,
    )

    body = config_check(tmp_path, root, ACME_ROUTE.replace('kind = "acme"', 'kind = "acne"'))

    assert body["problems"] == ["routes.acme.kind 'acne' is unknown (known: acme, offline, openai)"]


def test_a_third_party_route_kind_serves_the_gate(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {"foureyes.route_kinds": {"acme": "acme_kind:build"}},
        acme_kind=ACME_KIND,
    )
    config = tmp_path / "foureyes.toml"
    config.write_text(ACME_ROUTE, encoding="utf-8")
    server = start_serve_process(
        ["--config", str(config)], env=env_with(tmp_path, root), cwd=tmp_path
    )
    assert server.process is not None
    try:
        with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0) as client:
            reply = client.chat.completions.create(
                model="foureyes-support",
                messages=[{"role": "user", "content": "I had a long day."}],
            )
    finally:
        output = stop_process(server.process)
    assert "plugin route_kinds acme = acme_kind:build (acme-plugin 1.0)" in output
    assert reply.model_extra is not None
    assert reply.model_extra["foureyes"]["reason"] == "approved"
    calls = (tmp_path / "acme.log").read_text(encoding="utf-8").splitlines()
    assert "acme counselor" in calls and "acme supervisor" in calls


def test_a_third_party_rule_fires_in_a_gate_run_on_the_offline_routes(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {"foureyes.rules": {"acme_rule": "acme_rules:ACME_RULE"}},
        acme_rules=ACME_RULE,
    )
    server = start_serve_process([], env=env_with(tmp_path, root), cwd=tmp_path)
    assert server.process is not None
    try:
        with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0) as client:
            reply = client.chat.completions.create(
                model="foureyes-support",
                messages=[{"role": "user", "content": "I had a long day."}],
            )
            assert reply.model_extra is not None
            block = reply.model_extra["foureyes"]
            trace = client.get(f"/traces/{block['trace_id']}", cast_to=object)
    finally:
        stop_process(server.process)
    assert block["decision"] == "fallback" and block["reason"] == "rule_violation"
    assert '"acme_rule"' in json.dumps(trace)


def test_a_plugin_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {"foureyes.route_kinds": {"acme": "acme_missing:build"}},
        acme_kind=ACME_KIND,
    )

    body = config_check(tmp_path, root)

    assert body["ok"] is False
    [problem] = body["problems"]
    assert problem.startswith(
        "foureyes.route_kinds entry point acme = acme_missing:build (acme-plugin 1.0) cannot be "
        "loaded: ModuleNotFoundError"
    )


def test_a_plugin_of_the_wrong_type_is_named_and_nothing_of_its_group_is_used(
    tmp_path: Path,
) -> None:
    root = distribution(
        tmp_path / "site",
        {
            "foureyes.route_kinds": {
                "acme": "acme_rules:NOT_A_RULE",
                "acme_two": "acme_kind:two_arguments",
            },
            "foureyes.rules": {"acme_rule": "acme_rules:NOT_A_RULE"},
        },
        acme_kind=ACME_KIND,
        acme_rules=ACME_RULE,
    )

    body = config_check(tmp_path, root)

    assert body["problems"][1].startswith(
        "foureyes.route_kinds entry point acme_two = acme_kind:two_arguments (acme-plugin 1.0): "
        "<function two_arguments"
    )
    assert "does not take (name, route, environ)" in body["problems"][1]
    del body["problems"][1]
    assert body["problems"] == [
        "foureyes.route_kinds entry point acme = acme_rules:NOT_A_RULE (acme-plugin 1.0): "
        "a str is not a provider factory (not callable)",
        "foureyes.rules entry point acme_rule = acme_rules:NOT_A_RULE (acme-plugin 1.0): "
        "a str is not a foureyes.gate.rules.Rule",
    ]


def test_serve_refuses_to_start_with_a_broken_rule_plugin(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {"foureyes.rules": {"acme_rule": "acme_rules:NOT_A_RULE"}},
        acme_rules=ACME_RULE,
    )
    result = subprocess.run(
        [*FOUREYES, "serve", "--json"],
        env=env_with(tmp_path, root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem.startswith("foureyes.rules entry point acme_rule = acme_rules:NOT_A_RULE")
    assert not (tmp_path / "plugins.db").exists()


def test_a_plugin_clashing_with_a_builtin_id_is_refused(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {
            "foureyes.route_kinds": {"openai": "acme_kind:build"},
            "foureyes.rules": {"too_long": "acme_rules:CLASHING"},
        },
        acme_kind=ACME_KIND,
        acme_rules=ACME_RULE,
    )

    body = config_check(tmp_path, root)

    ours = f"(foureyes {foureyes.__version__})"
    assert body["problems"] == [
        "foureyes.route_kinds 'openai' clashes with the built-in: openai = acme_kind:build "
        f"(acme-plugin 1.0); openai = foureyes.llm.openai_compat:build_openai_provider {ours}",
        "foureyes.rules 'too_long' clashes with the built-in: too_long = acme_rules:CLASHING "
        f"(acme-plugin 1.0); too_long = foureyes.gate.rules:TOO_LONG {ours}",
    ]


def test_foureyes_own_entry_points_missing_is_a_stale_install(tmp_path: Path) -> None:
    # A foureyes dist-info without entry points first on the path shadows the installed
    # one, as an editable install made before the entry points were declared would.
    root = tmp_path / "site"
    info = root / f"foureyes-{foureyes.__version__}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: foureyes\nVersion: {foureyes.__version__}\n",
        encoding="utf-8",
    )

    body = config_check(tmp_path, root)

    assert body["problems"] == [
        f"foureyes registers no {group} entry points: its installed metadata is stale "
        "(reinstall it, e.g. pip install -e .)"
        for group in ("foureyes.route_kinds", "foureyes.rules", "foureyes.checks")
    ]


def test_serve_names_a_factory_that_raises_or_builds_no_provider(tmp_path: Path) -> None:
    root = distribution(
        tmp_path / "site",
        {
            "foureyes.route_kinds": {
                "acme": "acme_kind:build_failing",
                "nil": "acme_kind:build_nothing",
            }
        },
        acme_kind=ACME_KIND,
    )
    config = tmp_path / "foureyes.toml"
    config.write_text(
        ACME_ROUTE.replace('supervisor = "acme"', 'supervisor = "nil"')
        + '\n[routes.nil]\nkind = "nil"\nmodel = "m"\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [*FOUREYES, "serve", "--config", str(config), "--json"],
        env=env_with(tmp_path, root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result
    assert json.loads(result.stdout)["problems"] == [
        "routes.acme: route kind acme = acme_kind:build_failing (acme-plugin 1.0) failed: "
        "RuntimeError: acme endpoint not configured",
        "routes.nil: route kind nil = acme_kind:build_nothing (acme-plugin 1.0) built a "
        "NoneType, not a provider (complete and aclose)",
    ]
