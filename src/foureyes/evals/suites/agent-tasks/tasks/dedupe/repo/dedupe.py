def unique(items, key=None):
    """``items`` without repeats; ``key``, if given, tells which items are repeats."""
    if key is None:
        return list(set(items))
    return list({key(item): item for item in items}.values())
