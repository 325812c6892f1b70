"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys
import time

# Run in a zone far from UTC, so that a timestamp read as local time shows.
os.environ["TZ"] = "XST+5"
time.tzset()

sys.path.insert(0, os.getcwd())
from feed import latest
from report import daily_counts

failed = 0


def expect(label, thunk, expected):
    global failed
    try:
        got = thunk()
    except Exception as exc:  # a crash fails the case, not the verifier
        got = f"{type(exc).__name__}: {exc}"
    if got != expected:
        failed += 1
        print(f"{label}: expected {expected!r}, got {got!r}")


def ev(n, ts):
    return {"id": n, "ts": ts}


def ids(events):
    return [event["id"] for event in events]


REPORTED = [ev(1, "2024-03-10T12:00:00+00:00"), ev(2, "2024-03-10T23:30:00-05:00")]
expect("reported", lambda: daily_counts(REPORTED), {"2024-03-10": 1, "2024-03-11": 1})
expect("east of UTC, early", lambda: daily_counts([ev(1, "2024-03-11T01:30:00+02:00")]), {"2024-03-10": 1})
expect("Z suffix", lambda: daily_counts([ev(1, "2024-03-10T23:59:59Z"), ev(2, "2024-03-11T00:00:00Z")]), {"2024-03-10": 1, "2024-03-11": 1})
expect("no offset means UTC", lambda: daily_counts([ev(1, "2024-03-10T23:30:00"), ev(2, "2024-03-11T00:10:00")]), {"2024-03-10": 1, "2024-03-11": 1})
expect("fractions of a second", lambda: daily_counts([ev(1, "2024-03-10T22:00:00.250-03:00")]), {"2024-03-11": 1})
expect("half-hour offset", lambda: daily_counts([ev(1, "2024-03-11T05:00:00+05:30")]), {"2024-03-10": 1})
expect("new year", lambda: daily_counts([ev(1, "2023-12-31T20:00:00-08:00")]), {"2024-01-01": 1})
expect("no events", lambda: daily_counts([]), {})
FEED = [
    ev(1, "2024-03-11T01:00:00+00:00"),  # 01:00 UTC
    ev(2, "2024-03-10T23:30:00-05:00"),  # 04:30 UTC: the newest
    ev(3, "2024-03-11T03:00:00+01:00"),  # 02:00 UTC
    ev(4, "2024-03-10T22:00:00Z"),        # 22:00 UTC the day before
]
expect("latest across offsets", lambda: ids(latest(FEED)), [2, 3, 1])
expect("latest, all", lambda: ids(latest(FEED, n=10)), [2, 3, 1, 4])
expect("latest, naive and aware mixed", lambda: ids(latest([ev(1, "2024-03-10T10:00:00"), ev(2, "2024-03-10T09:30:00-01:00"), ev(3, "2024-03-10T10:15:00+01:00")], n=3)), [2, 1, 3])
expect("latest, one", lambda: ids(latest([ev(7, "2024-03-10T10:00:00Z")])), [7])
sys.exit(1 if failed else 0)
