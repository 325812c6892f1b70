"""The hidden verifier: the reported case and the edges a fix must get right."""

import os
import sys

sys.path.insert(0, os.getcwd())
from policy import RetryPolicy
from retry import call_with_retry

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


def run(outcomes, policy):
    """What happens: (result or raised error, calls, waits, how many logged lines say it gave up)."""
    calls, waits, logs = [], [], []
    errors = {}

    def call():
        calls.append(1)
        outcome = outcomes[min(len(calls), len(outcomes)) - 1]
        if isinstance(outcome, type) and issubclass(outcome, Exception):
            errors[len(calls)] = outcome(f"failure {len(calls)}")
            raise errors[len(calls)]
        return outcome

    try:
        result = call_with_retry(call, policy, sleep=waits.append, log=logs.append)
    except Exception as exc:
        last = errors.get(len(calls))
        result = f"raised {type(exc).__name__}: {exc}" + ("" if exc is last else " (not the last error)")
    return result, len(calls), waits, sum("giving up" in str(line) for line in logs)


CE, TE = ConnectionError, TimeoutError
expect("reported: fails twice, then works", lambda: run([CE, CE, "ok"], RetryPolicy(3)), ("ok", 3, [0.5, 1.0], 0))
expect("works at once", lambda: run(["ok"], RetryPolicy(3)), ("ok", 1, [], 0))
expect("works on the second", lambda: run([TE, "ok"], RetryPolicy(3)), ("ok", 2, [0.5], 0))
expect("always fails, 3 attempts", lambda: run([CE], RetryPolicy(3)), ("raised ConnectionError: failure 3", 3, [0.5, 1.0], 1))
expect("always fails, 1 attempt", lambda: run([CE], RetryPolicy(1)), ("raised ConnectionError: failure 1", 1, [], 1))
expect("always fails, 2 attempts", lambda: run([TE], RetryPolicy(2)), ("raised TimeoutError: failure 2", 2, [0.5], 1))
expect("last of 5 works", lambda: run([CE, CE, CE, CE, 7], RetryPolicy(5, base_delay=1)), (7, 5, [1, 2, 4, 8], 0))
expect("always fails, 5 attempts", lambda: run([CE], RetryPolicy(5, base_delay=2)), ("raised ConnectionError: failure 5", 5, [2, 4, 8, 16], 1))
expect("an error not retried", lambda: run([ValueError], RetryPolicy(3)), ("raised ValueError: failure 1", 1, [], 0))
expect("not retried after a retried one", lambda: run([CE, KeyError], RetryPolicy(4)), ("raised KeyError: 'failure 2'", 2, [0.5], 0))
expect("one attempt that works", lambda: run([None], RetryPolicy(1)), (None, 1, [], 0))
expect("own retry_on", lambda: run([KeyError, "ok"], RetryPolicy(2, retry_on=(KeyError,))), ("ok", 2, [0.5], 0))
sys.exit(1 if failed else 0)
