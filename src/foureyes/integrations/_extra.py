"""The one error every integration raises when its framework is not installed."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(module: str, framework: str, extra: str, exc: ImportError) -> ImportError:
    """The error an integration raises when ``exc`` says its framework is not installed.

    An :class:`ImportError` (so ``except ImportError`` around an optional import still works)
    whose message names the extra, and whose ``name`` is the module that was missing.
    """
    return ImportError(
        f"foureyes.integrations.{module} needs {framework}: pip install 'foureyes[{extra}]'"
        f" ({exc})",
        name=exc.name,
    )
