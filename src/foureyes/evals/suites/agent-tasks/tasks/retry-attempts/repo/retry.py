import time


def call_with_retry(call, policy, sleep=time.sleep, log=print):
    """``call()``, tried again under ``policy`` while it fails."""
    error = None
    for attempt in range(1, policy.attempts):
        try:
            return call()
        except policy.retry_on as exc:
            error = exc
            sleep(policy.delay(attempt))
    log(f"giving up after {policy.attempts} attempts")
    raise error
