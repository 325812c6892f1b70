"""foureyes: a model proposes; deterministic code decides; every decision is bound to its bytes."""

from foureyes.config import Config, load_config
from foureyes.core.errors import FoureyesError
from foureyes.core.reasons import ReasonCode

__all__ = ["Config", "FoureyesError", "ReasonCode", "__version__", "load_config"]

__version__ = "0.1.0"
