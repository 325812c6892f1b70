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


def flag(settings, name, default=False):
    """The boolean setting ``name``."""
    value = settings.get(name)
    if value is None:
        return default
    return value.lower() in ("true", "1")
