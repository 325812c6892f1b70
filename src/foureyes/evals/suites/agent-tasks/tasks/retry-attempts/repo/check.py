"""The reported case (run: python check.py): a call that fails twice, then works."""

import os
import sys

sys.path.insert(0, os.getcwd())
from policy import RetryPolicy
from retry import call_with_retry

outcomes = [ConnectionError("refused"), ConnectionError("refused"), "ok"]
requests = []


def flaky():
    requests.append(len(requests) + 1)
    outcome = outcomes[len(requests) - 1]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


try:
    got = call_with_retry(flaky, RetryPolicy(attempts=3), sleep=lambda s: None)
except ConnectionError as exc:
    got = f"ConnectionError: {exc}"
if got != "ok":
    print(f"expected 'ok' on the third request, got {got!r} after {len(requests)} requests")
    sys.exit(1)
