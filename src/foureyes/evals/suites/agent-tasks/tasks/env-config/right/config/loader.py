import os

from config.defaults import DEFAULTS

PREFIX = "APP_"
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def _read(name, text, default):
    """``text`` as a value of the type of ``default``."""
    try:
        if isinstance(default, bool):
            word = text.strip().lower()
            if word in TRUE or word in FALSE:
                return word in TRUE
            raise ValueError(text)
        return type(default)(text)
    except ValueError:
        kind = type(default).__name__
        raise ValueError(f"{name}={text!r} is not a valid {kind}") from None


def load_config(environ=None):
    """The settings: the defaults, each overridden by its ``APP_*`` variable if set."""
    environ = os.environ if environ is None else environ
    config = dict(DEFAULTS)
    for key, default in DEFAULTS.items():
        name = PREFIX + key.upper()
        if name in environ:
            config[key] = _read(name, environ[name], default)
    return config
