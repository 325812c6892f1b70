def clamp(x, lo, hi):
    """``x`` limited to ``lo..hi``."""
    return min(x, hi)
