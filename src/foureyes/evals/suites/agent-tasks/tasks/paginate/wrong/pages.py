def pages(items, size):
    """``items`` in consecutive pages of at most ``size`` items."""
    return [items[i * size : (i + 1) * size] for i in range(len(items) // size + 1)]
