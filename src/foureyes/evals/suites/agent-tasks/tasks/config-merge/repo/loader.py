import json

from defaults import DEFAULTS
from merge import merge


def load_settings(text):
    """A user's settings, from the JSON ``text`` of their settings file."""
    return merge(DEFAULTS, json.loads(text))
