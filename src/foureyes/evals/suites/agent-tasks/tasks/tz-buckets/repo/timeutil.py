from datetime import datetime


def parse_ts(text):
    """The moment that an ISO 8601 timestamp of our event log names."""
    return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
