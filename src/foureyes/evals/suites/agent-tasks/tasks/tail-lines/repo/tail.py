def tail(lines, n):
    """The last ``n`` of ``lines``."""
    return lines[len(lines) - n - 1 :]
