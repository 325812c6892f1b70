"""foureyes: a model proposes; deterministic code decides; every decision is bound to its bytes."""

from __future__ import annotations

import importlib
import logging
import typing

# First: the server's modules read it while this package is still being imported.
__version__ = "0.1.0"

if typing.TYPE_CHECKING:
    from foureyes.config import Config, load_config
    from foureyes.core.errors import FoureyesError
    from foureyes.core.reasons import ReasonCode
    from foureyes.guard import Guard, SyncGuard

# A library configures no output of its own (the logging HOWTO's advice): without this, a
# host that configured nothing would get foureyes' warnings from ``logging.lastResort``,
# a blocking write to stderr on whichever thread logged (the host's event loop).
logging.getLogger("foureyes").addHandler(logging.NullHandler())

__all__ = [
    "Config",
    "FoureyesError",
    "Guard",
    "ReasonCode",
    "SyncGuard",
    "__version__",
    "load_config",
]

# Imported on first use, because `import foureyes.<anything>` (every CLI command, the
# simulator) runs this file first: the guard loads the pipeline and the store, the config
# pydantic-settings (about 0.25 s of CPU), and `foureyes.core` the whole core (about
# 0.07 s); benchmarks/README.md, "Starting the command line". tests/test_import_cost.py
# holds `import foureyes` to this file alone.
_LAZY = {
    "Config": "foureyes.config",
    "FoureyesError": "foureyes.core.errors",
    "Guard": "foureyes.guard",
    "ReasonCode": "foureyes.core.reasons",
    "SyncGuard": "foureyes.guard",
    "load_config": "foureyes.config",
}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'foureyes' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
