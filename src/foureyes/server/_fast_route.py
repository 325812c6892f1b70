"""A FastAPI route whose plainly well-formed JSON requests skip FastAPI's per-request solving.

FastAPI answers a request to a route by reading its body, parsing its content type,
solving the dependency tree (with telemetry hooks, overrides and an exit stack),
validating the body and calling the endpoint: about 240 Python calls of each reply on the
gateway's hot route (benchmarks/README.md, "The gateway's routes on the app itself"),
more than the route's own work outside the pipeline.

:class:`FastJsonRoute` is a FastAPI route (a route class is FastAPI's own way to change how
a route handles its requests): FastAPI builds and documents it, and answers every request
out of the ordinary as it answers any route's. Only a request that is plainly well formed
takes the short way: its content type is exactly ``application/json``, its body decodes as
JSON (``json.loads``, as FastAPI decodes it) and validates as the body's model (in Python
mode, as FastAPI validates it), no dependency is overridden and FastAPI's telemetry is not
collecting. The route then runs the endpoint's dependencies itself, in their order, and
calls the endpoint: what FastAPI would have done with that request. Any other request (not
JSON, another content type, a body that does not validate) goes to FastAPI's own handler
untouched, so every error is FastAPI's, in FastAPI's order (a body that is not JSON, or
nested deeper than the decoder goes, refused before the dependencies run, one that does
not validate after them); the short way runs no dependency before it knows it will not
hand the request over.

It supports (checked when the route is built; any other endpoint is FastAPI's alone) an
endpoint with exactly one body parameter, a pydantic model that is not embedded, maybe the
:class:`~starlette.requests.Request`, and dependencies that are ``async`` functions of the
request alone (a ``Request`` parameter and nothing else, no ``yield``, no security
scopes); no path, query, header or cookie parameter, no response model, and it returns a
:class:`~starlette.responses.Response`.

Only on a route registered on an app's own router: FastAPI 0.16x keeps the dependencies an
``include_router`` call adds outside the route (in a context it builds per request), where
the short way would not see them.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

try:  # FastAPI's telemetry (0.16x); older releases have none to collect
    from fastapi.telemetry import get_telemetry_data
except ImportError:  # pragma: no cover - depends on the installed FastAPI

    def get_telemetry_data() -> None:  # type: ignore[misc]
        return None


__all__ = ["FastJsonRoute", "plan_of"]

_Handler = Callable[[Request], Coroutine[Any, Any, Response]]
_Dependency = Callable[[Request], Coroutine[Any, Any, Any]]


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """How the short way calls one endpoint."""

    call: Callable[..., Coroutine[Any, Any, Any]]
    body_name: str
    model: type[BaseModel]
    request_name: str | None
    dependencies: tuple[tuple[str, _Dependency], ...]


def _no_parameters_but_request(dependant: Dependant) -> bool:
    """Whether ``dependant`` takes nothing from the request but the request itself."""
    return not (
        dependant.path_params
        or dependant.query_params
        or dependant.header_params
        or dependant.cookie_params
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
    )


def _dependency(dependant: Dependant) -> tuple[str, _Dependency] | None:
    """A sub-dependency the short way can run (its parameter's name and call), or ``None``."""
    call = dependant.call
    simple = (
        inspect.iscoroutinefunction(call)
        and dependant.request_param_name is not None
        and not dependant.dependencies
        and not dependant.body_params
        and _no_parameters_but_request(dependant)
        and not getattr(dependant, "own_oauth_scopes", None)
    )
    if not simple or call is None or dependant.name is None:
        return None
    return dependant.name, call


def plan_of(route: APIRoute) -> _Plan | None:
    """How the short way calls ``route``'s endpoint, or ``None`` if it cannot.

    Also ``None`` when FastAPI's description of the endpoint lacks a field this reads (a
    FastAPI that renamed one): the route is then FastAPI's alone.
    """
    try:
        return _plan(route)
    except AttributeError:
        return None


def _plan(route: APIRoute) -> _Plan | None:
    dependant = route.dependant
    if route.response_model is not None or len(dependant.body_params) != 1:
        return None
    if not _no_parameters_but_request(dependant) or not inspect.iscoroutinefunction(dependant.call):
        return None
    body = dependant.body_params[0]
    model = body.field_info.annotation
    embedded = getattr(body.field_info, "embed", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)) or embedded:
        return None
    dependencies = [_dependency(sub) for sub in dependant.dependencies]
    if dependant.call is None or any(d is None for d in dependencies):
        return None
    return _Plan(
        call=dependant.call,
        body_name=body.name,
        model=model,
        request_name=dependant.request_param_name,
        dependencies=tuple(d for d in dependencies if d is not None),
    )


class FastJsonRoute(APIRoute):
    """An ``APIRoute`` whose plainly well-formed requests skip FastAPI's solving.

    Give it as a route's ``route_class_override`` on an app's own router; see the module
    docstring for what it does and what it needs.
    """

    def get_route_handler(self) -> _Handler:
        """FastAPI's handler, behind the short way when the endpoint's shape allows it."""
        full: _Handler = super().get_route_handler()
        plan = plan_of(self)
        if plan is None:
            return full
        overrides = self.dependency_overrides_provider

        async def handle(request: Request) -> Response:
            if (
                request.headers.get("content-type") != "application/json"
                or getattr(overrides, "dependency_overrides", None)
                or get_telemetry_data() is not None
            ):
                return await full(request)
            raw = await request.body()  # kept by the request: FastAPI reads it again
            try:
                body = plan.model.model_validate(json.loads(raw))
            except (ValueError, RecursionError, ValidationError):
                # Not JSON (nested too deeply for the decoder, too), or not the model:
                # FastAPI refuses it in its words and order.
                return await full(request)
            values: dict[str, Any] = {plan.body_name: body}
            if plan.request_name is not None:
                values[plan.request_name] = request
            for name, dependency in plan.dependencies:
                values[name] = await dependency(request)
            response = await plan.call(**values)
            if not isinstance(response, Response):
                raise TypeError(f"{self.path}: a FastJsonRoute endpoint must return a Response")
            return response

        return handle
