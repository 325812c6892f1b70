LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def keep(level, minimum):
    return level >= minimum


def filter_logs(lines, minimum):
    """The lines ("LEVEL message") whose level is at or above ``minimum``."""
    return [line for line in lines if keep(line.split(" ", 1)[0], minimum)]
