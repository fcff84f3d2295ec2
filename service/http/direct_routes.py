"""Hot routes that take the gate's decoded body straight to their endpoint.

Per ``POST /v1/exec``, FastAPI's request handling (its parameter solving through the dependency
machinery, the route wrapper's request object and exit stacks) cost more than the route's own work
outside the registry.  A ``DirectRoute`` binds its endpoint's parameters itself, with validators
built once from the endpoint's own annotations and run the way FastAPI runs its (python mode,
``from_attributes``), calls the endpoint and sends its response.

Only requests it accepts take that way: anything else (no decoded JSON object, a value that does
not validate, FastAPI's own telemetry watching the request) is handed to the framework's handler,
so every refusal, and its 422 body, is still the framework's.  The OpenAPI document is built from
the same route, so it does not change either.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from pydantic import TypeAdapter, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from .request_gate import JSON_SCOPE, GatedRoute

#: Where FastAPI's native OpenTelemetry support keeps a request it observes: such requests take its way.
FASTAPI_TELEMETRY_SCOPE = "fastapi.telemetry"


@dataclass(frozen=True)
class ParameterBinder:
    """An endpoint's arguments from a request: its ``Request``, validated path parameters and JSON body."""

    request_name: str | None
    path: tuple[tuple[str, TypeAdapter[Any]], ...]
    body: tuple[str, TypeAdapter[Any]] | None

    @classmethod
    def of(cls, endpoint: Callable[..., object], path_names: frozenset[str]) -> ParameterBinder:
        """The binder of ``endpoint``, whose parameters must be a ``Request``, path parameters and one body."""
        hints = typing.get_type_hints(endpoint, include_extras=True)
        request_name: str | None = None
        path: list[tuple[str, TypeAdapter[Any]]] = []
        body: list[tuple[str, TypeAdapter[Any]]] = []
        for name in inspect.signature(endpoint).parameters:
            hint = hints[name]
            if isinstance(hint, type) and issubclass(hint, Request):
                request_name = name
            elif name in path_names:
                path.append((name, TypeAdapter(hint)))
            else:
                body.append((name, TypeAdapter(hint)))
        if len(body) > 1:
            raise TypeError(f"{endpoint.__qualname__}: a direct route takes at most one body parameter")
        return cls(request_name, tuple(path), body[0] if body else None)

    def bind(self, request: Request) -> dict[str, object] | None:
        """The endpoint's arguments, or None when the framework must see this request (it may refuse it)."""
        arguments: dict[str, object] = {}
        try:
            if self.body is not None:
                decoded = request.scope.get(JSON_SCOPE)
                if not isinstance(decoded, dict):
                    return None
                name, adapter = self.body
                arguments[name] = adapter.validate_python(decoded, from_attributes=True)
            path_params = request.scope["path_params"]
            for name, adapter in self.path:
                arguments[name] = adapter.validate_python(path_params[name], from_attributes=True)
        except ValidationError:
            return None
        if self.request_name is not None:
            arguments[self.request_name] = request
        return arguments


class DirectRoute(GatedRoute):
    """A gated route whose accepted requests reach the endpoint without FastAPI's request handling.

    Served from a router it was added to (``RouteGroup.add_routes``); a router that includes another
    router serves that router's routes through the framework's handler only.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        super().__init__(path, endpoint, **options)
        solved = self.dependant
        if solved.dependencies or solved.query_params or solved.header_params or solved.cookie_params:
            raise TypeError(f"{path}: a direct route takes no dependencies, query, header or cookie parameters")
        answer = typing.get_type_hints(endpoint).get("return")
        if not (isinstance(answer, type) and issubclass(answer, Response)):
            raise TypeError(f"{path}: a direct route's endpoint answers a Response (it is sent as it is)")
        binder = ParameterBinder.of(endpoint, frozenset(self.param_convertors))
        self.direct = DirectEndpoint(binder, endpoint, framework=self.app)
        self.app = self.direct


class DirectEndpoint:
    """ASGI app of a direct route: the endpoint's response for requests it binds, the framework's for the rest.

    An endpoint's exceptions reach the app's exception middleware, which answers them with the same
    handlers the framework's route would have used.
    """

    def __init__(
        self, binder: ParameterBinder, endpoint: Callable[..., Coroutine[None, None, Response]], framework: ASGIApp
    ) -> None:
        self.binder = binder
        self.endpoint = endpoint
        self.framework = framework

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get(FASTAPI_TELEMETRY_SCOPE) is None:
            request = Request(scope, receive, send)
            arguments = self.binder.bind(request)
            if arguments is not None:
                response = await self.endpoint(**arguments)
                await response(scope, receive, send)
                return
        await self.framework(scope, receive, send)
