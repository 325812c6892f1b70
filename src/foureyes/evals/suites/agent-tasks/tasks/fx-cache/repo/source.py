"""The exchange-rate service (a local stand-in with its published rates)."""

RATES = {
    ("EUR", "USD", "2024-05-01"): 1.07,
    ("EUR", "USD", "2024-05-02"): 1.08,
    ("EUR", "USD", "2024-05-03"): 1.075,
    ("GBP", "USD", "2024-05-01"): 1.25,
    ("GBP", "USD", "2024-05-02"): 1.26,
    ("GBP", "USD", "2024-05-03"): 1.255,
    ("EUR", "GBP", "2024-05-01"): 0.855,
    ("EUR", "GBP", "2024-05-02"): 0.857,
    ("EUR", "GBP", "2024-05-03"): 0.86,
}
calls = []
"""Every request made to the service: it bills each one."""


def fetch_rate(base, quote, day):
    """Ask the service for the rate of ``base`` in ``quote`` on ``day``."""
    calls.append((base, quote, day))
    return RATES[(base, quote, day)]
