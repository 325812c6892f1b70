def headings(markdown):
    """The (level, title) of each heading of ``markdown``."""
    found = []
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        marks = len(line) - len(line.lstrip("#"))
        if 1 <= marks <= 6 and line[marks : marks + 1] == " ":
            found.append((marks, line[marks:].strip()))
    return found
