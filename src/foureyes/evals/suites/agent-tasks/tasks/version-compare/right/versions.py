def newer(a, b):
    """Whether dotted version ``a`` is newer than ``b``."""
    left = [int(p) for p in a.split(".")]
    right = [int(p) for p in b.split(".")]
    width = max(len(left), len(right))
    left += [0] * (width - len(left))
    right += [0] * (width - len(right))
    return left > right
