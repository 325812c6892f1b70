from collections import Counter
from datetime import datetime, timezone


def _utc_day(text):
    return datetime.fromisoformat(text).astimezone(timezone.utc).date().isoformat()


def daily_counts(events):
    """How many events each UTC day had, as {"YYYY-MM-DD": count}."""
    # Cut the day in UTC, from the offset the timestamp carries.
    days = Counter(_utc_day(event["ts"]) for event in events)
    return dict(sorted(days.items()))
