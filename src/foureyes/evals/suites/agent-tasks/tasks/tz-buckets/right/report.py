from collections import Counter

from timeutil import parse_ts


def daily_counts(events):
    """How many events each UTC day had, as {"YYYY-MM-DD": count}."""
    # parse_ts gives UTC datetimes (see timeutil); the day is cut here.
    days = Counter(parse_ts(event["ts"]).date().isoformat() for event in events)
    return dict(sorted(days.items()))
