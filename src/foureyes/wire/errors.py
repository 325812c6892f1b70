"""The one error of the wire layer: a request its schema admits that breaks a rule.

A request body that does not validate is pydantic's ``ValidationError`` (the server's
422, the library's :class:`~foureyes.core.errors.ContractError`); what the schema cannot
say (the last message is the user's, a tool result answers an earlier call, a call's
arguments are strict JSON) the translation into pipeline calls checks, and raises
:class:`InvalidRequest`. Each edge maps it once: the server to a 422 ``invalid_request``
naming ``param``, :class:`~foureyes.Guard` to its ``invalid_input`` error.
"""

from __future__ import annotations

from foureyes.core.errors import ContractError

__all__ = ["INVALID_REQUEST", "InvalidRequest"]

INVALID_REQUEST = "invalid_request"
"""The ``reason`` of every :class:`InvalidRequest`."""


class InvalidRequest(ContractError):
    """Raised when a request breaks a rule its schema cannot express.

    Attributes:
        schema: the request model's name (``ChatCompletionRequest``, ``CheckRequest``, ...).
        reason: always :data:`INVALID_REQUEST`.
        param: the field at fault, dotted (``messages.2.tool_call_id``).
        problem: what is wrong with it, in English; never the request's content beyond an
            id it names.
        detail: ``"<param>: <problem>"``.
    """

    def __init__(self, schema: str, param: str, problem: str) -> None:
        self.param = param
        self.problem = problem
        super().__init__(schema, INVALID_REQUEST, f"{param}: {problem}")
