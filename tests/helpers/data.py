"""The third-party data for tests: where it is, and what a test does when it is not there.

The directory is the one setting of :func:`foureyes.core.datadir.data_dir`
(``$FOUREYES_DATA_DIR``, default ``../shared/data`` from the checkout), the same the CLI
defaults read. Files are read in place, never copied into the package. Every test that
reads it goes through :func:`require_data` (directly, through the ``third_party_data``
fixture, or through a support function that calls it): when the file is missing the test
is skipped with a message saying how to get the data, except under ``CI=true``, where a
missing data set fails the test instead of hiding it behind a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foureyes.core.datadir import DATA_HOWTO, data_dir

__all__ = ["DATA_DIR", "LAYOUT", "in_ci", "require_data", "third_party_data"]

DATA_DIR = data_dir()
"""The third-party data directory (it may not exist: see :func:`require_data`)."""
LAYOUT = (
    *(f"risk/zh/sos1k_fold{n}.tsv" for n in (1, 2, 3, 4)),
    "risk/en/twitter_suicidal_intention.csv",
    "risk/en/sdcnl_combined.csv",
    "trajectories/swe-agent/marshmallow-code__marshmallow-1867.traj",
    "trajectories/swe-agent/pydicom__pydicom-1458.traj",
    "trajectories/openhands/basic.json",
    "trajectories/openhands/basic_interactions.json",
    "trajectories/cassettes/test_deepseek_deferred_capability_with_thinking.yaml",
    "trajectories/cassettes/test_deepseek_model_thinking_part.yaml",
    "trajectories/cassettes/test_deepseek_model_thinking_stream.yaml",
    "trajectories/cassettes/test_multiple_agent_tool_calls.yaml",
)
"""Every file of the data directory the tests read (the table of docs/data.md)."""


def in_ci() -> bool:
    """True under ``CI=true`` (as the CI runner sets it), where missing data is a failure."""
    return os.environ.get("CI", "").strip().lower() == "true"


def require_data(relative: str | Path = "") -> Path:
    """``DATA_DIR / relative`` when it exists; else skip the test, or fail it under CI.

    Call it in a test, a fixture or a support function a test calls (at collection time,
    a skip skips the whole module).
    """
    path = DATA_DIR / relative
    if path.exists():
        return path
    message = f"third-party data not found at {path}: {DATA_HOWTO}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: the data must be there)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


@pytest.fixture
def third_party_data() -> Path:
    """The data directory with every file of :data:`LAYOUT`, for tests that read several."""
    for relative in LAYOUT:
        require_data(relative)
    return DATA_DIR
