"""Where the third-party data sets are: the one setting the CLI defaults and the tests read.

The labelled risk sets, the agent trajectories and the recorded model traffic that
calibration, training, the shipped review suite and many tests use are other projects'
data, never shipped with foureyes (docs/data.md names each upstream repository). Their
directory is ``$FOUREYES_DATA_DIR``; unset, it is ``../shared/data`` from the root of
the checkout this package runs from, or from the working directory when the package is
installed from a wheel. It is not a config key: ``foureyes.toml`` configures a service,
and the service reads none of this data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DATA_DIR_ENV", "DATA_HOWTO", "data_dir"]

DATA_DIR_ENV = "FOUREYES_DATA_DIR"
"""The environment variable naming the third-party data directory."""
DATA_HOWTO = (
    f"set {DATA_DIR_ENV} to a directory laid out as docs/data.md describes "
    "(its files come from the upstream repositories named there)"
)
"""How to get the data, for messages that say it is missing."""
_DEFAULT = Path("..") / "shared" / "data"
# src/foureyes/core/datadir.py: the checkout's root is three levels above this package.
_CHECKOUT = Path(__file__).resolve().parents[3]


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The third-party data directory: ``$FOUREYES_DATA_DIR``, else ``../shared/data``.

    The default is taken from the checkout's root (where ``pyproject.toml`` is) when this
    package runs from one, else from the working directory. The directory may not exist:
    callers say so with :data:`DATA_HOWTO`.

    Args:
        environ: the environment to read (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    named = env.get(DATA_DIR_ENV, "").strip()
    if named:
        return Path(named).expanduser().resolve()
    root = _CHECKOUT if (_CHECKOUT / "pyproject.toml").is_file() else Path.cwd()
    return (root / _DEFAULT).resolve()
