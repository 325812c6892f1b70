import time


def call_with_retry(call, policy, sleep=time.sleep, log=print):
    """``call()``, tried again under ``policy`` while it fails."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return call()
        except policy.retry_on:
            if attempt == policy.attempts:
                log(f"giving up after {policy.attempts} attempts")
                raise
            sleep(policy.delay(attempt))
