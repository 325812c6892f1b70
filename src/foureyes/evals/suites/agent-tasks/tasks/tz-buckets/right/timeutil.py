from datetime import datetime, timezone


def parse_ts(text):
    """The moment that an ISO 8601 timestamp of our event log names."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)
