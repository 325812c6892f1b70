from emails import normalize


class Accounts:
    def __init__(self):
        self._names = {}

    def sign_up(self, email, name):
        key = normalize(email)
        if key in self._names:
            raise ValueError(f"{email} already has an account")
        self._names[key] = name

    def has(self, email):
        return normalize(email) in self._names

    def log_in(self, email):
        """The name of the account of ``email``."""
        key = normalize(email).lower()
        if key not in self._names:
            raise LookupError(f"no account for {email}")
        return self._names[key]
