"""The team's own patterns: loaded from config, compiled once, a bad one a ConfigError."""

from __future__ import annotations

from pathlib import Path

import pytest

from foureyes.config import InputConfig, InputPatternConfig, load_config
from foureyes.core.errors import ConfigError
from foureyes.inputs import CheckKind, FindingReason, InputCategory, InputChecks, scan
from foureyes.inputs.team import team_checks

CONFIG = """
[input]
max_chars = 5000
encoded_depth = 2

[input.patterns.competitor_talk]
category = "off_topic"
patterns = ['\\bacme\\s*corp\\b', '竞品']
detects = "mentions of the competitor"
languages = ["en", "zh-Hans"]
"""


def load(tmp_path: Path, text: str) -> InputConfig:
    path = tmp_path / "foureyes.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path).input


def test_team_patterns_from_config_are_checks(tmp_path: Path) -> None:
    config = load(tmp_path, CONFIG)
    assert config.max_chars == 5000 and config.encoded_depth == 2
    [check] = team_checks(config.patterns)
    assert check.manifest.id == "competitor_talk"
    assert check.manifest.kind is CheckKind.DETERMINISTIC
    assert check.manifest.categories == {InputCategory.OFF_TOPIC}
    assert check.manifest.languages == ("en", "zh-Hans")
    assert check.manifest.detects == "mentions of the competitor"
    text = "Is ＡＣＭＥ  Corp cheaper? 竞 品 also"
    result = scan(text, [check])
    assert [(text[f.start : f.end], f.reason) for f in result.findings] == [
        ("ＡＣＭＥ  Corp", FindingReason.TEAM_PATTERN),
        ("竞 品", FindingReason.TEAM_PATTERN),
    ]


def test_the_default_input_config() -> None:
    config = load_config(None, environ={}).input
    assert config.max_chars == 200_000 and config.encoded_depth == 3 and config.patterns == {}


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("(unclosed", "input.patterns.competitor_talk: '(unclosed' is invalid: missing )"),
        ("a*", "input.patterns.competitor_talk: 'a*' matches the empty string"),
    ],
)
def test_a_bad_pattern_in_the_file_is_a_config_error_naming_it(
    tmp_path: Path, pattern: str, problem: str
) -> None:
    text = CONFIG.replace("'\\bacme\\s*corp\\b'", repr(pattern))
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    [line] = caught.value.problems
    assert line.startswith(f"input: {problem}"), line


@pytest.mark.parametrize(
    ("section", "key"),
    [
        (
            '[input.patterns.x]\ncategory = "nonsense"\npatterns = ["a"]\n',
            "input.patterns.x.category",
        ),
        ('[input.patterns.x]\ncategory = "pii"\npatterns = []\n', "input.patterns.x.patterns"),
        (
            '[input.patterns.x]\ncategory = "pii"\npatterns = ["a"]\nextra = 1\n',
            "input.patterns.x.extra",
        ),
        ("[input]\nmax_chars = 0\n", "input.max_chars"),
        ("[input]\nencoded_depth = 99\n", "input.encoded_depth"),
    ],
)
def test_other_bad_values_are_config_errors_naming_the_key(
    tmp_path: Path, section: str, key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, section)
    assert any(key in problem for problem in caught.value.problems), caught.value.problems


def test_a_bad_check_id_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'Bad-Id' is not a check id"):
        load(tmp_path, '[input.patterns.Bad-Id]\ncategory = "pii"\npatterns = ["a"]\n')


def test_team_checks_compile_and_refuse_on_their_own() -> None:
    # Built without validation (as a caller holding a copy might): the compile here still
    # refuses, one line per problem.
    entry = InputPatternConfig.model_construct(
        category="pii", patterns=("[", "x?", "ok"), detects="", languages=("*",)
    )
    with pytest.raises(ConfigError) as caught:
        team_checks({"mine": entry, "Bad": entry})
    assert caught.value.problems == (
        "input.patterns: 'Bad' is not a check id ([a-z][a-z0-9_]*)",
        "input.patterns.mine: '[' is invalid: unterminated character set at position 0",
        "input.patterns.mine: 'x?' matches the empty string",
    )


def test_input_checks_with_a_low_limit_refuse_longer_text() -> None:
    checks = InputChecks((), max_chars=3)
    assert checks.scan("abcd").refused == "too_long"
