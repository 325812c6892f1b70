def load(text):
    """The settings of ``key = value`` lines (``#`` starts a comment)."""
    settings = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = line.partition("=")
        settings[key.strip()] = value.strip()
    return settings


TRUE = ("true", "yes", "on", "1")
FALSE = ("false", "no", "off", "0")


def flag(settings, name, default=False):
    """The boolean setting ``name``."""
    value = settings.get(name)
    if value is None:
        return default
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise ValueError(f"setting {name!r}: {value!r} is not a boolean")
