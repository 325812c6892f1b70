def newer(a, b):
    """Whether dotted version ``a`` is newer than ``b``."""
    return a > b
