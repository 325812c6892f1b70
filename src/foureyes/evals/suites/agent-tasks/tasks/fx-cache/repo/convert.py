from rates import rate


def convert(amount, base, quote, day):
    """``amount`` of ``base`` in ``quote`` at the rate of ``day``, to the cent."""
    return round(amount * rate(base, quote, day), 2)
