"""Route groups: one class per concern whose methods are its routes, built with the parts they use.

A group's constructor names what its routes depend on (the cell registry, a key's tools, the
stores, ...); the composition root (``service.http.app``) builds each group from the service's
parts.  ``route(...)`` marks a method with its path and OpenAPI metadata; ``RouteGroup.router()``
mounts the bound methods in the order the class defines them (the order routes match in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from fastapi import APIRouter, Response
from fastapi.datastructures import Default
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute

from .request_gate import GatedRoute

Endpoint = TypeVar("Endpoint", bound=Callable[..., object])
#: The attribute ``route`` sets on a method: its ``Route``.
ROUTE_MARK = "_codemode_route"


@dataclass(frozen=True)
class Route:
    """How one method is served: method and path, and what the OpenAPI document says of it."""

    method: str
    path: str
    summary: str | None = None
    tags: tuple[str, ...] = ()
    response_model: object = None
    responses: dict[int | str, dict[str, object]] = field(default_factory=dict)
    response_class: type[Response] | None = None
    include_in_schema: bool = True
    status_code: int | None = None
    operation_id: str | None = None


def route(
    method: str,
    path: str,
    *,
    summary: str | None = None,
    tags: tuple[str, ...] = (),
    response_model: object = None,
    responses: Mapping[int | str, Mapping[str, object]] | None = None,
    response_class: type[Response] | None = None,
    include_in_schema: bool = True,
    status_code: int | None = None,
    operation_id: str | None = None,
) -> Callable[[Endpoint], Endpoint]:
    """Mark a route group's method as the endpoint of ``method path``, with its OpenAPI metadata.

    ``operation_id``: the OpenAPI operation's name, which generated clients name their functions after
    (``exec_cell``); a route in the schema must have one (FastAPI's default spells out path and method).
    """
    if include_in_schema and not operation_id:
        raise ValueError(f"{method} {path}: a route in the OpenAPI schema needs an operation_id")
    spec = Route(
        method,
        path,
        summary,
        tags,
        response_model,
        {code: dict(answer) for code, answer in (responses or {}).items()},
        response_class,
        include_in_schema,
        status_code,
        operation_id,
    )

    def mark(endpoint: Endpoint) -> Endpoint:
        setattr(endpoint, ROUTE_MARK, spec)
        return endpoint

    return mark


def example(value: object) -> dict[str, object]:
    """An OpenAPI ``responses`` entry that shows ``value`` as an example answer."""
    return {"content": {"application/json": {"example": value}}}


class RouteGroup:
    """A set of routes served by one object's methods."""

    def router(self) -> APIRouter:
        """An ``APIRouter`` with every marked method of this group, in definition order."""
        router = APIRouter(route_class=GatedRoute)
        self.add_routes(router)
        return router

    def add_routes(self, router: APIRouter) -> list[BaseRoute]:
        """Add every marked method of this group to ``router`` (gated routes, in definition order); return them.

        The app adds its groups to its own router rather than including routers: an included router is
        one more level every request is matched through.
        """
        added: list[BaseRoute] = []
        for name, member in vars(type(self)).items():
            spec: Route | None = getattr(member, ROUTE_MARK, None)
            if spec is None:
                continue
            router.add_api_route(
                spec.path,
                getattr(self, name),
                methods=[spec.method],
                summary=spec.summary,
                tags=list(spec.tags) or None,
                response_model=spec.response_model if spec.response_model is not None else Default(None),
                responses=dict(spec.responses) or None,
                response_class=spec.response_class or Default(JSONResponse),
                include_in_schema=spec.include_in_schema,
                status_code=spec.status_code,
                route_class_override=GatedRoute,
                operation_id=spec.operation_id,
            )
            added.append(router.routes[-1])
        return added
