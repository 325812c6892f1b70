"""The ``foureyes`` command line."""

from foureyes.cli.main import app, main

__all__ = ["app", "main"]
