def delays(n, base, cap):
    """``n`` retry delays doubling from ``base``, none above ``cap``."""
    return [base * 2**i for i in range(n)]
