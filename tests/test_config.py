from pathlib import Path

import pytest

from foureyes.config import Config, load_config, mask_url
from foureyes.core.errors import ConfigError
from foureyes.core.roles import Role

FLASH = """
[routes.flash]
kind = "openai"
base_url = "https://user:hunter2@example-endpoint/v1"
model = "glm-4.7-flash"
api_key_env = "FLASH_API_KEY"
timeout_s = 12
max_tokens = 600
temperature = 0.3
daily_calls = 1000
daily_budget_usd = 0.3
price_in = 0.1
price_out = 0.4
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "foureyes.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_no_config_means_every_role_on_the_offline_route_and_sqlite() -> None:
    cfg = load_config(environ={})
    assert {cfg.roles.route_for(r) for r in Role} == {"offline"}
    assert cfg.routes["offline"].kind == "offline"
    assert cfg.store.url.startswith("sqlite+aiosqlite:///")


def test_design_example_loads_and_offline_route_stays_available(tmp_path: Path) -> None:
    text = FLASH + '[roles]\ncounselor = "flash"\nsupervisor = "flash"\n'
    cfg = load_config(write(tmp_path, text), environ={})
    assert cfg.route_for(Role.COUNSELOR)[1].model == "glm-4.7-flash"
    assert cfg.route_for(Role.RISK_L1)[0] == "offline"
    assert set(cfg.routes) == {"flash", "offline"}


def test_config_file_named_by_environment(tmp_path: Path) -> None:
    p = write(tmp_path, "[gate]\nmax_revisions = 2\n")
    assert load_config(environ={"FOUREYES_CONFIG": str(p)}).gate.max_revisions == 2


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    p = write(tmp_path, FLASH + "[gate]\nmax_revisions = 2\n")
    env = {
        "FOUREYES_GATE__MAX_REVISIONS": "4",
        "FOUREYES_ROUTES__FLASH__MODEL": "deepseek-chat",
        "FOUREYES_PRIVACY__STORE_RAW_TEXT": "true",
    }
    cfg = load_config(p, environ=env)
    assert cfg.gate.max_revisions == 4
    assert cfg.routes["flash"].model == "deepseek-chat"
    assert cfg.routes["flash"].timeout_s == 12  # untouched keys keep the file's value
    assert cfg.privacy.store_raw_text is True


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("[gate]\nmax_revision = 1\n", {}, "unknown key 'gate.max_revision'"),
        ("[gaet]\n", {}, "unknown key 'gaet'"),
        (FLASH + "bogus = 1\n", {}, "unknown key 'routes.flash.bogus'"),
        ("", {"FOUREYES_RISK__CONFIRM": "0.9"}, "unknown key 'risk.confirm'"),
        ('[roles]\ncounselor = "flash"\n', {}, "roles.counselor names route 'flash'"),
        ("[risk]\nconfirm_confidence = 1.5\n", {}, "risk.confirm_confidence"),
        ("[risk]\nreserved_share = 1\n", {}, "risk.reserved_share"),
        ("[gate]\nmax_calls = 0\n", {}, "gate.max_calls"),
        ('[store]\nurl = "mysql://x"\n', {}, "store.url must start with"),
        ('[routes.x]\nkind = "openai"\nmodel = "m"\n', {}, "base_url is required"),
        ('[routes.x]\nkind = "offline"\napi_key_env = "not a name"\n', {}, "api_key_env"),
        (
            '[routes.x]\nkind = "offline"\ndaily_budget_usd = 1\n',
            {},
            "daily_budget_usd needs price_in and price_out",
        ),
        ("[gate\n", {}, "is not valid TOML"),
    ],
)
def test_bad_config_is_an_error_that_names_the_key(
    tmp_path: Path, text: str, env: dict[str, str], expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ=env)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", environ={})


def test_missing_api_key_variable_is_named_never_printed(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, FLASH + '[roles]\ncounselor = "flash"\n'), environ={})
    with pytest.raises(ConfigError) as info:
        cfg.require_secrets({})
    assert info.value.problems == ("environment variable FLASH_API_KEY is not set",)
    cfg.require_secrets({"FLASH_API_KEY": "sk-secret"})


def test_unused_route_needs_no_key(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, FLASH), environ={})
    assert cfg.missing_secrets({}) == []


def test_masked_view_hides_url_passwords() -> None:
    assert (
        mask_url("postgresql+asyncpg://fy:pw@db:5432/x") == "postgresql+asyncpg://fy:***@db:5432/x"
    )
    cfg = load_config(
        environ={"FOUREYES_STORE__URL": "postgresql+asyncpg://fy:pw@db/x"},
    )
    assert "pw" not in str(cfg.masked())


def test_route_repr_masks_password(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, FLASH), environ={})
    assert "hunter2" not in repr(cfg.routes["flash"])
    assert "hunter2" not in str(cfg.masked())


def test_config_is_frozen() -> None:
    cfg = Config()
    with pytest.raises(ValueError):
        cfg.gate = cfg.gate  # type: ignore[misc]
    changed = cfg.model_copy(update={"gate": cfg.gate.model_copy(update={"max_calls": 9})})
    assert changed.gate.max_calls == 9 and cfg.gate.max_calls == 6


def test_crisis_shared_routes_are_those_a_crisis_role_shares_with_another() -> None:
    cfg = Config.model_validate(
        {
            "routes": {"a": {"kind": "offline"}, "b": {"kind": "offline"}},
            "roles": {"counselor": "a", "risk_l1": "a", "risk_l2": "b", "reviewer": "b"},
        }
    )
    assert cfg.risk.reserved_share == 0.2
    # supervisor and selector stay on 'offline', which no crisis role uses.
    assert cfg.crisis_shared_routes() == ["a", "b"]
    alone = cfg.model_copy(update={"roles": cfg.roles.model_copy(update={"reviewer": "a"})})
    assert alone.crisis_shared_routes() == ["a"]
