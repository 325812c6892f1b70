def unique(items, key=None):
    """``items`` without repeats; ``key``, if given, tells which items are repeats."""
    seen, kept = set(), []
    for item in items:
        mark = item if key is None else key(item)
        if mark not in seen:
            seen.add(mark)
            kept.append(item)
    return kept
