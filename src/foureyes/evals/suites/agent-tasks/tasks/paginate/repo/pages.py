def pages(items, size):
    """``items`` in consecutive pages of at most ``size`` items."""
    return [items[i : i + size] for i in range(0, len(items) - size, size)]
