def delays(n, base, cap):
    """The waits before each of ``n`` retries."""
    return [min(cap, base * 2**i) for i in range(n)]
