"""foureyes: a model proposes; deterministic code decides; every decision is bound to its bytes."""

# First: the server's modules read it while this package is still being imported.
__version__ = "0.1.0"

from foureyes.config import Config, load_config
from foureyes.core.errors import FoureyesError
from foureyes.core.reasons import ReasonCode
from foureyes.guard import Guard, SyncGuard

__all__ = [
    "Config",
    "FoureyesError",
    "Guard",
    "ReasonCode",
    "SyncGuard",
    "__version__",
    "load_config",
]
