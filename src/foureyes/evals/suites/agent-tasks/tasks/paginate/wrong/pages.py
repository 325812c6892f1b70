def pages(items, size):
    """``items`` split into pages of ``size``."""
    return [items[i * size : (i + 1) * size] for i in range(len(items) // size + 1)]
