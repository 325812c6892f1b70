"""Integrations with other frameworks, each an optional extra (never a core dependency).

- :mod:`foureyes.integrations.langchain` (``pip install 'foureyes[langchain]'``): a chat
  model that guards any LangChain chat model with a :class:`~foureyes.Guard`, and a
  ``ChatOpenAI`` for the foureyes gateway that keeps its decision.
- :mod:`foureyes.integrations.agents` (``pip install 'foureyes[agents]'``): OpenAI
  Agents SDK guardrails built on :class:`~foureyes.Guard`.

Importing this package imports none of them; import the module you use. Without its
framework, importing a module raises an :class:`ImportError` naming the extra to install
(:func:`missing_extra`, shared by both).
"""

from __future__ import annotations

__all__: list[str] = []


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
