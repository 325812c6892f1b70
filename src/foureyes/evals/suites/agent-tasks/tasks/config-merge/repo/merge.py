def merge(base, override):
    """``base`` with ``override`` laid over it, nested tables merged key by key."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base
