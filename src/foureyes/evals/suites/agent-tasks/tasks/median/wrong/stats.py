def median(values):
    """The median of a non-empty list of numbers."""
    return sorted(values)[len(values) // 2]
