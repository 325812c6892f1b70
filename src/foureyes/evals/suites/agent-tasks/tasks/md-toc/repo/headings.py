def headings(markdown):
    """The (level, title) of each heading of ``markdown``."""
    found = []
    for line in markdown.splitlines():
        marks = len(line) - len(line.lstrip("#"))
        if 1 <= marks <= 6 and line[marks : marks + 1] == " ":
            found.append((marks, line[marks:].strip()))
    return found
