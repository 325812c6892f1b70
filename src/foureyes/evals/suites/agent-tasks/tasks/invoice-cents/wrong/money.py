def to_cents(text):
    """The amount written ``text`` (such as ``"4.35"``), in cents."""
    return int(float(text) * 100)


def format_cents(cents):
    """``cents`` written as an amount."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"
