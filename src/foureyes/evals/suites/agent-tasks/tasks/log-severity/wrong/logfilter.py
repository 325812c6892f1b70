LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def keep(level, minimum):
    return LEVELS.index(level) > LEVELS.index(minimum)


def filter_logs(lines, minimum):
    """The lines ("LEVEL message") whose level is at or above ``minimum``."""
    return [line for line in lines if keep(line.split(" ", 1)[0], minimum)]
