def pages(items, size):
    """``items`` split into pages of ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]
