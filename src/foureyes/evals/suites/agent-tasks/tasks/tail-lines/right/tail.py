def tail(lines, n):
    """The last ``n`` lines (all of them when there are fewer)."""
    return lines[max(len(lines) - n, 0) :]
