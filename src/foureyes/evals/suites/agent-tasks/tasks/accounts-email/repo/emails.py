def normalize(email):
    """The form of ``email`` that accounts and invitations are kept under."""
    return email.strip()
