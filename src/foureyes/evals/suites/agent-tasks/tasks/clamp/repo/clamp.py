def clamp(x, lo, hi):
    """``x`` limited to ``lo..hi``."""
    return max(lo, min(x, lo))
