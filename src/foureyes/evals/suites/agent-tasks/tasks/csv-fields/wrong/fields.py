def split_fields(line):
    """The fields of one CSV line."""
    fields, current, quoted = [], "", False
    for char in line:
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            fields.append(current)
            current = ""
        else:
            current += char
    fields.append(current)
    return fields
