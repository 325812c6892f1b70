import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foureyes.cli import app
from tests.helpers.resources import resource_entry

runner = CliRunner()

FLASH = """
[routes.flash]
kind = "openai"
base_url = "https://user:hunter2@example-endpoint/v1"
model = "glm-4.7-flash"
api_key_env = "FLASH_API_KEY"

[roles]
counselor = "flash"
supervisor = "flash"
"""
UNREVIEWED = """
[routes.flash]
kind = "openai"
base_url = "https://example-endpoint/v1"
model = "glm-4.7-flash"

[roles]
counselor = "flash"
"""


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("serve", "simulate", "config"):
        assert command in result.output


def test_check_without_config_shows_offline_defaults() -> None:
    result = runner.invoke(app, ["config", "check", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["ok"] is True
    assert set(body["config"]["roles"].values()) == {"offline"}


def test_check_shows_the_gateway_mode_support_by_default_guard_when_set(tmp_path: Path) -> None:
    default = json.loads(runner.invoke(app, ["config", "check", "--json"]).output)
    path = tmp_path / "guard.toml"
    path.write_text('[server]\nmode = "guard"\n', encoding="utf-8")
    guard = runner.invoke(app, ["config", "check", "--json", "--config", str(path)])
    path.write_text('[server]\nmode = "proxy"\n', encoding="utf-8")
    bad = runner.invoke(app, ["config", "check", "--config", str(path)])

    assert default["config"]["server"]["mode"] == "support"
    assert json.loads(guard.output)["config"]["server"]["mode"] == "guard"
    assert bad.exit_code != 0 and "server.mode" in bad.output


def test_check_masks_secrets_and_names_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.toml"
    path.write_text(FLASH, encoding="utf-8")
    monkeypatch.setenv("FLASH_API_KEY", "sk-live-do-not-print")
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert "sk-live-do-not-print" not in result.output
    assert "hunter2" not in result.output
    body = json.loads(result.output)
    assert body["secrets"] == {"FLASH_API_KEY": "set"}
    assert body["config"]["roles"]["counselor"] == "flash"
    human = runner.invoke(app, ["config", "check", "--config", str(path)])
    assert human.exit_code == 0 and "sk-live-do-not-print" not in human.output


def test_check_fails_naming_a_missing_key_variable(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text(FLASH, encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 1
    body = json.loads(result.output)
    assert body["problems"] == ["environment variable FLASH_API_KEY is not set"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[gate]\nmax_revisoins = 2\n", "unknown key 'gate.max_revisoins'"),
        ('[routes.x]\nkind = "carrier-pigeon"\n', "routes.x.kind 'carrier-pigeon' is unknown"),
        ('[roles]\nsupervisor = "ghost"\n', "roles.supervisor names route 'ghost'"),
    ],
)
def test_check_fails_on_bad_config(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "f.toml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 1
    assert any(expected in p for p in json.loads(result.output)["problems"])
    human = runner.invoke(app, ["config", "check", "--config", str(path)])
    assert human.exit_code == 1


def test_config_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f.toml"
    path.write_text("[gate]\nmax_calls = 9\n", encoding="utf-8")
    monkeypatch.setenv("FOUREYES_CONFIG", str(path))
    result = runner.invoke(app, ["config", "check", "--json"])
    assert json.loads(result.output)["config"]["gate"]["max_calls"] == 9


def test_check_refuses_a_model_counselor_behind_the_offline_supervisor(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text(UNREVIEWED, encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 1, result.output
    body = json.loads(result.output)
    assert body["ok"] is False and body["error"] == "ConfigError"
    [problem] = body["problems"]
    assert problem.startswith("roles.supervisor is not mapped to a model")
    assert "roles.counselor uses route 'flash'" in problem
    assert "no second model reviews these replies" in problem
    assert "[gate] supervisor_unreviewed = true" in problem
    human = runner.invoke(app, ["config", "check", "--config", str(path)])
    assert human.exit_code == 1 and "roles.supervisor" in human.output


@pytest.mark.parametrize("how", ["file", "environment"])
def test_check_accepts_the_explicit_opt_out_and_lists_the_unreviewed_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    path = tmp_path / "f.toml"
    if how == "file":
        path.write_text(UNREVIEWED + "\n[gate]\nsupervisor_unreviewed = true\n", encoding="utf-8")
    else:
        path.write_text(UNREVIEWED, encoding="utf-8")
        monkeypatch.setenv("FOUREYES_GATE__SUPERVISOR_UNREVIEWED", "true")
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["ok"] is True and body["config"]["gate"]["supervisor_unreviewed"] is True
    [unreviewed] = body["unreviewed"]
    assert unreviewed.startswith("roles.supervisor is not mapped to a model")


def test_check_lists_nothing_unreviewed_when_both_or_neither_are_models(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text(UNREVIEWED + 'supervisor = "flash"\n', encoding="utf-8")
    for args in (["--config", str(path)], []):
        result = runner.invoke(app, ["config", "check", *args, "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["unreviewed"] == []


def test_check_names_the_kind_whose_template_has_no_slot(tmp_path: Path) -> None:
    kinds = tmp_path / "kinds.toml"
    kinds.write_text(
        '[kinds.verdict]\nsources = ["lifestyle.exercise"]\n'
        'label = {zh-Hans = "结论", zh-Hant = "結論", en = "Verdict"}\n'
        'template = {zh-Hans = "训练量不足。", zh-Hant = "{value}", en = "{value}"}\n',
        encoding="utf-8",
    )
    path = tmp_path / "f.toml"
    path.write_text(
        f'[evidence]\nkinds_file = "{kinds}"\ncatalog_file = "catalog.json"\n', encoding="utf-8"
    )
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 1, result.output
    [problem] = json.loads(result.output)["problems"]
    assert "kinds.verdict.template.zh-Hans" in problem and "no {slot}" in problem


@pytest.mark.parametrize(
    ("evidence", "fragment"),
    [
        ('kinds_file = "k.toml"\n', "a catalog source and kinds_file go together"),
        ('catalog_file = "c.json"\n', "a catalog source and kinds_file go together"),
        ('kinds_file = "k.toml"\ncatalog_url = "sqlite+aiosqlite:///a.db"\n', "catalog_table"),
        (
            'kinds_file = "k.toml"\ncatalog_file = "c.json"\n'
            'catalog_url = "sqlite+aiosqlite:///a.db"\ncatalog_table = "t"\n',
            "not both",
        ),
        (
            'kinds_file = "k.toml"\ncatalog_url = "mysql://u:pw@h/db"\ncatalog_table = "t"\n',
            "evidence.catalog_url must start with",
        ),
    ],
)
def test_check_refuses_an_incomplete_evidence_section(
    tmp_path: Path, evidence: str, fragment: str
) -> None:
    path = tmp_path / "f.toml"
    path.write_text("[evidence]\n" + evidence, encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 1, result.output
    assert any(fragment in p for p in json.loads(result.output)["problems"]), result.output
    assert "pw@" not in result.output


SHARED = """
[routes.flash]
kind = "openai"
base_url = "https://example-endpoint/v1"
model = "glm-4.7-flash"
daily_calls = 100

[routes.crisis]
kind = "openai"
base_url = "https://example-endpoint/v1"
model = "glm-4.7"

[roles]
counselor = "flash"
supervisor = "flash"
risk_l1 = "flash"
risk_l2 = "{l2}"
{risk}
"""


def _check(tmp_path: Path, *args: str, l2: str = "flash", risk: str = "") -> str:
    path = tmp_path / "shared.toml"
    path.write_text(SHARED.format(l2=l2, risk=risk), encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(path), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_check_warns_when_the_crisis_roles_share_a_route_with_the_chat_roles(
    tmp_path: Path,
) -> None:
    [entry] = json.loads(_check(tmp_path, "--json"))["crisis_shared_routes"]
    assert entry["route"] == "flash" and entry["reserved_share"] == 0.2
    assert entry["roles"] == ["counselor", "supervisor", "risk_l1", "risk_l2"]
    assert "20%" in entry["warning"] and "route of their own" in entry["warning"]
    human = " ".join(_check(tmp_path, "--verbose").split())
    assert "warning: route 'flash' serves counselor, supervisor, risk_l1, risk_l2" in human
    assert "config OK" in human


def test_check_says_nothing_is_kept_when_the_share_is_zero(tmp_path: Path) -> None:
    body = json.loads(_check(tmp_path, "--json", risk="[risk]\nreserved_share = 0"))
    [entry] = body["crisis_shared_routes"]
    assert "nothing is kept" in entry["warning"]


def test_check_is_quiet_when_the_crisis_roles_have_their_own_route(tmp_path: Path) -> None:
    path = tmp_path / "own.toml"
    path.write_text(
        SHARED.format(l2="crisis", risk="").replace('risk_l1 = "flash"', 'risk_l1 = "crisis"'),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["crisis_shared_routes"] == []
    # The offline defaults share the built-in engine, which costs nothing: no warning.
    default = runner.invoke(app, ["config", "check", "--json"])
    assert json.loads(default.output)["crisis_shared_routes"] == []


def _resources(tmp_path: Path, checked: str, review_days: int = 180) -> Path:
    entry = resource_entry(checked=checked, review_days=review_days)
    path = tmp_path / "resources.json"
    path.write_text(json.dumps({"entries": [entry]}), encoding="utf-8")
    return path


def test_check_reports_a_resource_entry_past_its_review_period(tmp_path: Path) -> None:
    config = tmp_path / "f.toml"
    resources = _resources(tmp_path, "2020-01-01", review_days=30)
    config.write_text(f"[risk]\nresources_file = '{resources}'\n", encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    [stale] = json.loads(result.output)["stale_resources"]
    assert stale.startswith("jp-test-line (JP): checked 2020-01-01, review every 30 days")
    human = runner.invoke(app, ["config", "check", "--config", str(config)])
    assert human.exit_code == 0 and "past its review period" in human.output
    assert "jp-test-line" in human.output


def test_check_lists_no_stale_resource_for_a_fresh_file(tmp_path: Path) -> None:
    import datetime as dt

    config = tmp_path / "f.toml"
    resources = _resources(tmp_path, dt.datetime.now(dt.UTC).date().isoformat())
    config.write_text(f"[risk]\nresources_file = '{resources}'\n", encoding="utf-8")
    result = runner.invoke(app, ["config", "check", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["stale_resources"] == []


def test_check_warns_about_resources_checked_only_against_a_secondary_source(
    tmp_path: Path,
) -> None:
    news = resource_entry(
        id="jp-news-line", source="https://news.example/a", source_kind="secondary"
    )
    resources = tmp_path / "resources.json"
    japan = {"en": "Japan", "zh-Hans": "日本", "zh-Hant": "日本"}
    resources.write_text(
        json.dumps({"regions": {"JP": japan}, "entries": [resource_entry(), news]}),
        encoding="utf-8",
    )
    config = tmp_path / "f.toml"
    config.write_text(
        f"[risk]\nresources_file = '{resources}'\nresources_mode = 'replace'\n", encoding="utf-8"
    )
    result = runner.invoke(app, ["config", "check", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["secondary_resources"] == [
        "jp-news-line (JP): source https://news.example/a, checked 2026-12-01"
    ]
    human = runner.invoke(app, ["config", "check", "--config", str(config)])
    assert human.exit_code == 0 and "only against a secondary source" in human.output
    assert "jp-news-line" in human.output and "config OK" in human.output
    # The packaged registry's secondary-sourced entries are listed the same way.
    packaged = json.loads(runner.invoke(app, ["config", "check", "--json"]).output)
    listed = packaged["secondary_resources"]
    assert any(line.startswith("sg-sos (SG): source https://") for line in listed)
    assert not any(line.startswith("sg-mindline-1771 ") for line in listed)


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "No such file"), ("[", "resource registry"), ('{"entries": [{"id": "x"}]}', "source")],
)
def test_check_fails_on_a_missing_or_malformed_resources_file(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    resources = tmp_path / "resources.json"
    if content is not None:
        resources.write_text(content, encoding="utf-8")
    config = tmp_path / "f.toml"
    config.write_text(
        f"[risk]\nresources_file = '{resources}'\nresources_mode = 'replace'\n", encoding="utf-8"
    )
    result = runner.invoke(app, ["config", "check", "--config", str(config), "--json"])
    assert result.exit_code == 1, result.output
    body = json.loads(result.output)
    assert body["error"] == "ConfigError"
    assert any(problem in p for p in body["problems"]), body["problems"]


def test_check_says_what_protects_open_unknowns_at_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = runner.invoke(app, ["config", "check", "--json"])
    [note] = json.loads(stored.output)["privacy_notes"]
    assert "kept in the store itself" in note and "not a copy of the store" in note
    assert "unknowns_key_env" in note
    human = runner.invoke(app, ["config", "check"])
    # Rich wraps long lines at the console's width.
    assert human.exit_code == 0
    assert "protects only a copy of the unknowns table" in " ".join(human.output.split())

    path = tmp_path / "f.toml"
    path.write_text('[privacy]\nunknowns_key_env = "UNKNOWNS_KEY"\n', encoding="utf-8")
    key = "0f" * 32
    monkeypatch.setenv("UNKNOWNS_KEY", key)
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["secrets"] == {"UNKNOWNS_KEY": "set"}
    [note] = body["privacy_notes"]
    assert "their key is in UNKNOWNS_KEY" in note and "kept in the store" not in note
    assert key not in result.output


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "environment variable UNKNOWNS_KEY is not set"),
        ("0f" * 16, "environment variable UNKNOWNS_KEY must hold a 32-byte key"),
    ],
)
def test_check_fails_on_an_unknowns_key_that_is_missing_or_not_32_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str | None, expected: str
) -> None:
    path = tmp_path / "f.toml"
    path.write_text('[privacy]\nunknowns_key_env = "UNKNOWNS_KEY"\n', encoding="utf-8")
    if value is None:
        monkeypatch.delenv("UNKNOWNS_KEY", raising=False)
    else:
        monkeypatch.setenv("UNKNOWNS_KEY", value)
    result = runner.invoke(app, ["config", "check", "--config", str(path), "--json"])
    assert result.exit_code == 1
    [problem] = json.loads(result.output)["problems"]
    assert problem.startswith(expected)
    assert value is None or value not in result.output


def test_check_prints_a_short_summary_of_a_valid_config_and_everything_when_verbose(
    tmp_path: Path,
) -> None:
    # The packaged registry has many entries checked only against a secondary source,
    # and this config shares a route with the crisis roles: warnings of two more kinds.
    path = tmp_path / "shared.toml"
    path.write_text(SHARED.format(l2="flash", risk=""), encoding="utf-8")
    body = json.loads(_check(tmp_path, "--json"))
    secondary, [shared] = body["secondary_resources"], body["crisis_shared_routes"]
    assert len(secondary) > 10

    short = runner.invoke(app, ["config", "check", "--config", str(path)])
    assert short.exit_code == 0, short.output
    lines = short.output.splitlines()
    assert lines[0] == f"config OK: config file {path}"
    assert len(lines) <= 10
    assert "route flash (openai, glm-4.7-flash): counselor, supervisor, risk_l1, risk_l2" in lines
    assert (
        f"  crisis resource checked only against a secondary source ({len(secondary)}), "
        f"e.g. {secondary[0]}" in lines
    )
    assert f"  crisis roles sharing a model route: {shared['warning']}" in lines
    assert lines[-1].startswith("run with --verbose for everything")
    assert "secondary_resources" not in short.output and '"store"' not in short.output

    verbose = runner.invoke(app, ["config", "check", "--config", str(path), "--verbose"])
    assert verbose.exit_code == 0, verbose.output
    flat = " ".join(verbose.output.split())
    assert flat.count("crisis resource checked only against a secondary source") == len(secondary)
    assert '"store": {' in verbose.output and "plugins (entry points)" in verbose.output
    assert "config OK" in verbose.output and "--verbose" not in verbose.output


def test_check_names_the_defaults_when_no_file_is_given() -> None:
    result = runner.invoke(app, ["config", "check"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "config OK: built-in offline defaults (no --config, FOUREYES_CONFIG unset)"
    )


def test_problems_are_printed_in_full_with_or_without_verbose(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text(FLASH + '\n[routes.x]\nkind = "carrier-pigeon"\n', encoding="utf-8")
    for args in ([], ["--verbose"]):
        result = runner.invoke(app, ["config", "check", "--config", str(path), *args])
        assert result.exit_code == 1
        assert "FLASH_API_KEY is not set" in result.output
        assert "routes.x.kind 'carrier-pigeon' is unknown" in result.output


def test_tables_piped_into_a_file_are_plain_rows_with_whole_values(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "check.txt"
    with out.open("wb") as file:
        command = [sys.executable, "-m", "foureyes.cli", "config", "check", "--verbose"]
        assert subprocess.run(command, stdout=file, check=False).returncode == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert not any(set(line) & set("│┃━─┏└…") for line in lines)
    start = lines.index("plugins (entry points)")
    assert lines[start + 1].split() == ["group", "name", "object", "distribution"]
    rows = [line.split() for line in lines[start + 2 : start + 4]]
    assert rows[0][:3] == ["route_kinds", "offline", "foureyes.llm.offline:build_offline_provider"]
    assert rows[1][:3] == [
        "route_kinds",
        "openai",
        "foureyes.llm.openai_compat:build_openai_provider",
    ]
    roles = lines[lines.index("roles") + 2 :][:7]
    assert [row.split() for row in roles] == [
        [role, "offline", "offline", "foureyes-offline"]
        for role in (
            "counselor",
            "supervisor",
            "risk_l1",
            "risk_l2",
            "reviewer",
            "selector",
            "primary",
        )
    ]


def test_check_lists_the_input_checks_and_refuses_a_team_pattern_reusing_one(
    tmp_path: Path,
) -> None:
    listed = runner.invoke(app, ["config", "check", "--json"])
    assert listed.exit_code == 0, listed.output
    checks = {c["name"] for c in json.loads(listed.output)["plugins"]["checks"]}
    assert {"instruction_override", "pii_phone", "pii_email"} <= checks

    path = tmp_path / "foureyes.toml"
    path.write_text(
        '[input.patterns.pii_email]\ncategory = "pii"\npatterns = ["@"]\n', encoding="utf-8"
    )
    refused = runner.invoke(app, ["config", "check", "--json", "--config", str(path)])
    assert refused.exit_code == 1
    problems = json.loads(refused.output)["problems"]
    assert any("input.patterns.pii_email reuses the id of a check" in p for p in problems)
