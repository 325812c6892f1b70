"""The console's user-interface strings: ``strings.json``, every string in every locale.

The page renders its static labels from it and hands the JavaScript the strings of the
page's locale, so every word on screen comes from this one file. Keys of closed sets are
the wire values they label (``reason.<code>``, ``level.<level>``, ``category.<l0
category>``), so the script looks them up directly.
"""

from __future__ import annotations

from foureyes.core.catalogue import Catalogue

__all__ = ["Catalogue", "console_strings"]


def console_strings() -> Catalogue:
    """The console's packaged catalogue (read once per process).

    Raises:
        UsageError: the packaged file is broken (a bug in this release).
    """
    return Catalogue.packaged(__package__ or __name__, "strings.json", name="console catalogue")
