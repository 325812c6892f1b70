"""The application's settings."""

from config.loader import load_config

__all__ = ["load_config"]
