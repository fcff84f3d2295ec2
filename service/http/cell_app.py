"""The four cell routes answered by a plain ASGI app of ours, ahead of FastAPI's request handling.

A ``return 1`` cell costs the service about a quarter of a millisecond of CPU, and FastAPI's handling of
an ordinary route (its exception and exit-stack layers, the router, the route's wrapper, the body read
again, parameter solving) added about a quarter more (docs/operations/benchmarks.md).  So ``CellApp``
sits inside the request gate, which has checked the caller and decoded the body, and answers a cell
route's request itself, by calling the same endpoint method FastAPI declares the route with
(``CellRoutes``: the OpenAPI document's four operations are still FastAPI's).

It answers only the requests it binds: a cell route's method and path, a cell id that passes the route's
own check, and for a route with a body a decoded JSON object that validates as its request model.
Anything else goes on to FastAPI, whose route answers it with the same endpoint, so every refusal (a 422
naming the field, a 405 with ``Allow``) is the framework's.  A failure of the endpoint is answered from the
one error table (``error_responses.answer_failure``); nothing of FastAPI's or Starlette's inner workings
is used, only their public request and response classes.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.schemas import ExecRequest, WaitRequest

from .cell_routes import CellId
from .error_responses import answer_failure
from .request_gate import JSON_SCOPE

EXEC_PATH = "/v1/exec"
CELLS_PATH = "/v1/cells/"
#: A cell id is checked as the routes check it (their path parameter's pattern).
_CELL_ID: TypeAdapter[str] = TypeAdapter(CellId)
Answer = Awaitable[Response]


class CellEndpoints(Protocol):
    """The cell routes' endpoints (``CellRoutes``), which FastAPI serves too."""

    async def exec_cell(self, body: ExecRequest, request: Request) -> Response: ...

    async def wait_cell(self, cell_id: str, request: Request, body: WaitRequest | None = None) -> Response: ...

    async def cancel_cell(self, cell_id: str, request: Request) -> Response: ...

    async def cell_status(self, cell_id: str, request: Request) -> Response: ...


class CellApp:
    """ASGI middleware: a cell route's request it binds is answered by the route's endpoint; the rest go on."""

    def __init__(self, app: ASGIApp, *, routes: CellEndpoints) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self._bound(scope) if scope["type"] == "http" else None
        if answer is None:
            await self.app(scope, receive, send)
            return
        try:
            response = await answer
        except Exception as exc:  # the endpoint's failure; sending the answer is the server's concern
            response = await answer_failure(Request(scope), exc)
        await response(scope, receive, send)

    def _bound(self, scope: Scope) -> Answer | None:
        """The endpoint call that answers this request, or None when FastAPI's route must see it."""
        method: str = scope["method"]
        path: str = scope["path"]
        routes = self.routes
        try:
            if path == EXEC_PATH:
                body = scope.get(JSON_SCOPE)
                if method != "POST" or not isinstance(body, dict):
                    return None
                return routes.exec_cell(ExecRequest.model_validate(body, from_attributes=True), Request(scope))
            if not path.startswith(CELLS_PATH):
                return None
            cell_id, *action = path[len(CELLS_PATH) :].split("/")
            if method == "GET" and not action:
                return routes.cell_status(_CELL_ID.validate_python(cell_id), Request(scope))
            if method != "POST" or action not in (["wait"], ["cancel"]):
                return None
            cell_id = _CELL_ID.validate_python(cell_id)
            if action == ["cancel"]:
                return routes.cancel_cell(cell_id, Request(scope))
            body = scope.get(JSON_SCOPE)
            if not isinstance(body, dict):
                return None
            return routes.wait_cell(cell_id, Request(scope), WaitRequest.model_validate(body, from_attributes=True))
        except ValidationError:
            return None
