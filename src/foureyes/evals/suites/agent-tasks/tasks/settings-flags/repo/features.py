from settings import flag, load

FEATURES = {"dark_mode": False, "beta_search": False, "telemetry": True}
"""Each feature and whether it is on when the settings do not name it."""


def features(text):
    """Which features the settings file ``text`` turns on."""
    settings = load(text)
    return {name: flag(settings, name, default) for name, default in FEATURES.items()}
