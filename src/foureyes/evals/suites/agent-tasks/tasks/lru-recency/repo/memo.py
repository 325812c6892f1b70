import functools

from lru import LRU

_MISSING = object()


def memoize(capacity):
    """Remember the results of the last ``capacity`` distinct calls."""

    def wrap(function):
        cache = LRU(capacity)

        @functools.wraps(function)
        def cached(*args):
            value = cache.get(args, _MISSING)
            if value is _MISSING:
                value = function(*args)
                cache.put(args, value)
            return value

        cached.cache = cache
        return cached

    return wrap
