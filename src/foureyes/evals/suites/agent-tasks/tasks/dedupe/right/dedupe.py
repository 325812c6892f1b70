def unique(items):
    """``items`` without repeats, in order of first appearance."""
    return list(dict.fromkeys(items))
