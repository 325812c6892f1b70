"""Integrations with other frameworks, each an optional extra (never a core dependency).

Import the one you need (``foureyes.integrations.agents``, ``foureyes.integrations.langchain``);
importing :mod:`foureyes` imports none of them, and a missing framework is an ``ImportError``
that names the extra to install.
"""

__all__: list[str] = []
