from timeutil import parse_ts


def latest(events, n=3):
    """The ``n`` most recent events, newest first."""
    return sorted(events, key=lambda event: parse_ts(event["ts"]), reverse=True)[:n]
