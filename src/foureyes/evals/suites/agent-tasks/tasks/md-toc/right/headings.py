def headings(markdown):
    """The (level, title) of each heading of ``markdown``."""
    found = []
    fence = None
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and not stripped.lstrip(fence[0]):
                fence = None
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]
            continue
        marks = len(line) - len(line.lstrip("#"))
        if 1 <= marks <= 6 and line[marks : marks + 1] == " ":
            found.append((marks, line[marks:].strip()))
    return found
