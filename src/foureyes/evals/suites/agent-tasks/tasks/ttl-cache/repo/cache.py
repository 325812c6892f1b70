from clock import SystemClock

_MISSING = object()


class TTLCache:
    """A small cache whose entries expire after ``ttl`` seconds."""

    def __init__(self, ttl, clock=None):
        self.ttl = ttl
        self.clock = clock or SystemClock()
        self._entries = {}

    def set(self, key, value):
        entry = self._entries.setdefault(key, [value, self.clock.now()])
        entry[0] = value

    def get(self, key, default=None):
        entry = self._entries.get(key)
        if entry is None:
            return default
        value, stored = entry
        if self.clock.now() - stored > self.ttl:
            del self._entries[key]
            return default
        return value

    def __contains__(self, key):
        return self.get(key, _MISSING) is not _MISSING

    def __len__(self):
        return sum(1 for key in list(self._entries) if key in self)
