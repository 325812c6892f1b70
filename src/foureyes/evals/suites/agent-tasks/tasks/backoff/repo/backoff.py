def delays(n, base, cap):
    """``n`` retry delays doubling from ``base``, none above ``cap``."""
    return [min(cap, base * 2 * i) for i in range(n)]
