from emails import normalize


class Invites:
    def __init__(self, accounts):
        self._accounts = accounts
        self._sent = set()

    def invite(self, email):
        """Send an invitation to ``email``; whether one was sent."""
        key = normalize(email)
        if key in self._sent or self._accounts.has(email):
            return False
        self._sent.add(key)
        return True
