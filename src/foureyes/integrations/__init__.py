"""Integrations with other frameworks, each an optional extra (never a core dependency).

- :mod:`foureyes.integrations.langchain` (``pip install 'foureyes[langchain]'``): a chat
  model that guards any LangChain chat model with a :class:`~foureyes.Guard`, and a
  ``ChatOpenAI`` for the foureyes gateway that keeps its decision.
- :mod:`foureyes.integrations.agents` (``pip install 'foureyes[agents]'``): OpenAI
  Agents SDK guardrails built on :class:`~foureyes.Guard`.

Importing this package imports none of them; import the module you use. Without its
framework, importing a module raises an :class:`ImportError` naming the extra to install
(``_extra.missing_extra``, shared by both).
"""

__all__: list[str] = []
