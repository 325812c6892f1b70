import os

from config.defaults import DEFAULTS

PREFIX = "APP_"


def load_config(environ=None):
    """The settings: the defaults, each overridden by its ``APP_*`` variable if set."""
    environ = os.environ if environ is None else environ
    config = dict(DEFAULTS)
    for key in DEFAULTS:
        name = PREFIX + key.upper()
        if name in environ:
            # Values are kept as given; each consumer converts what it reads
            # (see server.py, worker.py).
            config[key] = environ[name]
    return config
