def split_fields(line):
    """The fields of one CSV line."""
    return line.split(",")
