def newer(a, b):
    """Whether dotted version ``a`` is newer than ``b``."""
    return tuple(int(p) for p in a.split(".")) > tuple(int(p) for p in b.split("."))
