class ParseError(ValueError):
    """An expression that cannot be read."""
