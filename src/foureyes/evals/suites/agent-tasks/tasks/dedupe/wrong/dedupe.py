def unique(items):
    """``items`` without repeats, in order of first appearance."""
    return [x for i, x in enumerate(items) if x not in items[i + 1 :]]
