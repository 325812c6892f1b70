def tail(lines, n):
    """The last ``n`` of ``lines``."""
    return lines[max(len(lines) - n, 0) :]
