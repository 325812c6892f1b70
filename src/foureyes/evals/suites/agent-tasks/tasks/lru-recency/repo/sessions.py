from lru import LRU


class Sessions:
    """The live sessions; the ones idle longest are dropped when there are too many."""

    def __init__(self, capacity=1000):
        self._live = LRU(capacity)

    def seen(self, session_id, user):
        """``session_id`` of ``user`` made a request."""
        self._live.put(session_id, user)

    def user(self, session_id):
        """The user of a live session, or None."""
        return self._live.get(session_id)
