"""The plugin example of docs/plugins.md, installed as a distribution and run as written."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from foureyes.config import RouteConfig
from foureyes.core.roles import Role
from foureyes.gate import RuleCatalogue, RuleContext
from foureyes.llm import ChatMessage, ChatRequest
from tests.helpers.simulator import RunningSimulator
from tests.plugins.test_plugins import config_check, distribution, env_with

DOC = Path(__file__).parents[2] / "docs" / "plugins.md"


def snippets(language: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def example_module(tmp_path: Path) -> ModuleType:
    [code] = snippets("python")
    path = tmp_path / "acme_foureyes.py"
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("acme_foureyes_doc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_documented_plugin_installs_and_config_check_lists_it(tmp_path: Path) -> None:
    pyproject, route = snippets("toml")
    groups = tomllib.loads(pyproject)["project"]["entry-points"]
    [code] = snippets("python")
    root = distribution(tmp_path / "site", groups, acme_foureyes=code)

    body = config_check(tmp_path, root, route, REVIEWER_API_KEY="k")

    assert body["ok"] is True, body
    assert {"name": "acme", "value": "acme_foureyes:build_provider"}.items() <= next(
        k for k in body["plugins"]["route_kinds"] if k["name"] == "acme"
    ).items()
    assert ("no_refund_promise", "acme-plugin") in {
        (r["name"], r["distribution"]) for r in body["plugins"]["rules"]
    }


def test_the_documented_rule_and_provider_work_as_described(tmp_path: Path) -> None:
    module = example_module(tmp_path)
    # The built-in guarantee_claim fires on this text too; only the plugin's rule is run.
    catalogue = RuleCatalogue((module.NO_REFUND_PROMISE,))
    text = "Your FULL re\u200bfund is guaranteed."
    [finding] = catalogue.check(text, RuleContext(max_chars=300, region=None))
    assert finding.rule == "no_refund_promise"
    assert text[slice(*finding.span)] == "FULL re\u200bfund is guaranteed"
    assert catalogue.check("I hear you.", RuleContext(max_chars=300, region=None)) == ()

    provider = module.build_provider("acme", RouteConfig(kind="acme", model="acme-1"), {})
    request = ChatRequest(role=Role.COUNSELOR, messages=(ChatMessage(role="user", content="hi"),))
    result = asyncio.run(provider.complete(request, timeout_s=1))
    assert (result.text, result.route, result.model) == ("I hear you.", "acme", "acme-1")


# A Guard in a child process, where the example's distribution is on sys.path (entry
# points are read once per process): one reply on the page's config.
_REPLY = """
import asyncio, json, sys
from foureyes import Guard

async def main():
    async with Guard.open(sys.argv[1], store="memory", environ={"REVIEWER_API_KEY": "k"}) as g:
        outcome = await g.reply([{"role": "user", "content": "I had a long day."}])
    print(json.dumps([outcome.decision.value, outcome.reason.value, outcome.text]))

asyncio.run(main())
"""


def test_the_documented_provider_drafts_a_reply_the_gate_releases(
    tmp_path: Path, simulator: RunningSimulator
) -> None:
    pyproject, route = snippets("toml")
    groups = tomllib.loads(pyproject)["project"]["entry-points"]
    [code] = snippets("python")
    root = distribution(tmp_path / "site", groups, acme_foureyes=code)
    # The page's config, its reviewer being the simulator (an approving Supervisor).
    reviewer = {
        "https://reviewer.example/v1": simulator.base_url,
        "reviewer-model": "supervisor-sim",
    }
    for documented, here in reviewer.items():
        assert route.count(documented) == 1, documented
        route = route.replace(documented, here)
    config = tmp_path / "foureyes.toml"
    config.write_text(route, encoding="utf-8")
    approve = (
        '{"candidate_sha256": "{{candidate_sha256}}", "decision": "approve", '
        '"violations": [], "missing": []}'
    )
    simulator.load({"models": {"supervisor-sim": [{"content": approve}]}})

    child = subprocess.run(
        [sys.executable, "-c", _REPLY, str(config)],
        env=env_with(tmp_path, root),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )

    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout) == ["released", "approved", "I hear you."]
    [review] = simulator.requests()
    assert review["model"] == "supervisor-sim"
