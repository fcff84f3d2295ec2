"""Direct routes give the framework's verdict: a direct route and its framework twin answer alike.

Two routes share one endpoint body (the real exec and wait request models, the real request gate
and error handlers); one is ``direct``.  For every body, valid or not, both must answer the same
status and body, and the direct one must have skipped FastAPI's parameter solving exactly when
the framework accepted the request.  The app has the served app's direct door (``with_door``): the
direct routes lead, so their accepted requests skip the framework's middleware too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
from fastapi import FastAPI, Path, Request
from fastapi.testclient import TestClient

from service.api.schemas import ID_PATTERN, ExecRequest, WaitRequest
from service.auth import KeyRing
from service.cells.dispatch import RawJson
from service.errors import NotFound
from service.http.body_limits import BodyCaps
from service.http.direct_door import with_door
from service.http.direct_routes import DirectRoute, ParameterBinder
from service.http.error_responses import install_error_handlers
from service.http.request_gate import CallerDep, RequestGate
from service.http.request_json import BodyDecoder
from service.http.responses import JSONBytes
from service.http.route_group import RouteGroup, route
from service.settings import Settings
from tests.support.helper_pools import helper_pool

CellId = Annotated[str, Path(pattern=ID_PATTERN)]
GOOD_ID = "c" * 12


def _exec_answer(body: ExecRequest, request: Request) -> JSONBytes:
    if body.code == "refuse":
        raise NotFound("no such thing")
    if body.code == "break":
        raise RuntimeError("a bug")
    return JSONBytes({"body": body.model_dump(mode="json"), "took": _took(request)})


def _took(request: Request) -> str:
    # The framework's handler hands endpoints the gate's request class; a direct route the plain one,
    # and through the door no ExceptionMiddleware has put its handlers in the scope.
    if type(request) is not Request:
        return "framework"
    return "direct" if "starlette.exception_handlers" in request.scope else "door"


class Twins(RouteGroup):
    """Each endpoint twice: ``/direct/...`` is a direct route, ``/framework/...`` is not."""

    @route("POST", "/v1/direct/exec", direct=True, operation_id="direct_exec")
    async def direct_exec(self, body: ExecRequest, request: Request) -> JSONBytes:
        return _exec_answer(body, request)

    @route("POST", "/v1/direct/{cell_id}/wait", direct=True, operation_id="direct_wait")
    async def direct_wait(self, cell_id: CellId, request: Request, body: WaitRequest | None = None) -> JSONBytes:
        return JSONBytes({"id": cell_id, "body": _wait_fields(body), "took": _took(request)})

    @route("POST", "/v1/framework/exec", operation_id="framework_exec")
    async def framework_exec(self, body: ExecRequest, request: Request) -> JSONBytes:
        return _exec_answer(body, request)

    @route("POST", "/v1/framework/{cell_id}/wait", operation_id="framework_wait")
    async def framework_wait(self, cell_id: CellId, request: Request, body: WaitRequest | None = None) -> JSONBytes:
        return JSONBytes({"id": cell_id, "body": _wait_fields(body), "took": _took(request)})


def _wait_fields(body: WaitRequest | None) -> object:
    if body is None:
        return None
    # Result values arrive as the gate left them (RawJson): compared as their compact JSON text.
    results = [(r.id, r.ok, r.value.data.decode()) for r in body.tool_results if isinstance(r.value, RawJson)]
    return {"timeout_ms": body.timeout_ms, "results": results}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("direct"))).check()
    helpers = helper_pool()
    decoder = BodyDecoder(helpers)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        yield
        await helpers.close()

    app = FastAPI(lifespan=lifespan, openapi_url=None)  # no docs pages ahead of the twins: the direct ones lead
    install_error_handlers(app, Twins().add_routes(app.router))
    app.add_middleware(
        RequestGate, keys=KeyRing(settings), caps=BodyCaps(settings), decoder=decoder, metrics_require_key=False
    )
    with TestClient(with_door(app)) as c:
        yield c


JSON = {"content-type": "application/json"}
EXEC_BODIES: list[tuple[bytes, dict[str, str]]] = [
    (b'{"code": "return 1"}', JSON),
    (b'{"code": "return 1", "timeout_ms": 2000, "title": "t", "background": true}', JSON),
    (b'{"code": "return 1"}', {"content-type": "application/vnd.codemode+json; charset=utf-8"}),
    (b'{"code": "refuse"}', JSON),  # the endpoint raises a service error
    (b'{"code": "return 1", "timeout_ms": "2000"}', JSON),  # lax: the framework converts it too
    (b'{"code": "return 1", "timeout_ms": 5}', JSON),
    (b'{"code": "   "}', JSON),
    (b'{"code": "return 1", "surprise": 1}', JSON),
    (b'{"code": "return 1", "background": "yes"}', JSON),
    (b"{}", JSON),
    (b"null", JSON),
    (b"[]", JSON),
    (b'"return 1"', JSON),
    (b"7", JSON),
    (b'{"code": "return 1"}', {}),  # no content type: not JSON to the framework
    (b'{"code": "return 1"}', {"content-type": "text/plain"}),
    (b"", JSON),
    (b"{not json", JSON),
]


@pytest.mark.parametrize("body,headers", EXEC_BODIES)
def test_exec_twins_answer_alike(client: TestClient, body: bytes, headers: dict[str, str]) -> None:
    """A direct exec route answers every body exactly as the framework's route does."""
    direct = client.post("/v1/direct/exec", content=body, headers=headers)
    framework = client.post("/v1/framework/exec", content=body, headers=headers)
    assert direct.status_code == framework.status_code
    if framework.status_code == 200:
        assert framework.json()["took"] == "framework"
        assert direct.json() == {**framework.json(), "took": "door"}
    else:
        assert direct.json() == framework.json()


WAIT_CASES: list[tuple[str, bytes]] = [
    (GOOD_ID, b'{"timeout_ms": 2000}'),
    (GOOD_ID, b'{"tool_results": [{"id": "t1", "ok": true, "value": {"a": [1, 2]}}]}'),
    (GOOD_ID, b"{}"),
    (GOOD_ID, b""),
    (GOOD_ID, b"null"),
    (GOOD_ID, b'{"timeout_ms": 1}'),
    (GOOD_ID, b'{"tool_results": [{"id": "t1", "ok": "maybe"}]}'),
    ("bad%20id!", b'{"timeout_ms": 2000}'),
    ("x" * 300, b"{}"),
    ("bad%20id!", b'{"timeout_ms": 1}'),
]


@pytest.mark.parametrize("cell_id,body", WAIT_CASES)
def test_wait_twins_answer_alike(client: TestClient, cell_id: str, body: bytes) -> None:
    """A direct wait route (path parameter and optional body) answers as the framework's route does."""
    direct = client.post(f"/v1/direct/{cell_id}/wait", content=body, headers=JSON)
    framework = client.post(f"/v1/framework/{cell_id}/wait", content=body, headers=JSON)
    assert direct.status_code == framework.status_code
    if framework.status_code == 200:
        took_direct = json.loads(body or b"null") is not None  # no body object: nothing to bind directly
        assert direct.json() == {**framework.json(), "took": "door" if took_direct else "framework"}
    else:
        assert direct.json() == framework.json()


def test_a_direct_route_refuses_parameters_it_cannot_bind() -> None:
    """Only a ``Request``, path parameters and one body can be bound: two bodies are refused up front."""

    async def two_bodies(a: ExecRequest, b: WaitRequest) -> JSONBytes:
        return JSONBytes(None)

    with pytest.raises(TypeError, match="one body"):
        ParameterBinder.of(two_bodies, frozenset())


def test_a_direct_route_refuses_dependencies() -> None:
    """A route with a FastAPI dependency cannot be direct (the dependency would be skipped)."""

    async def with_key(body: ExecRequest, key: CallerDep) -> JSONBytes:
        return JSONBytes(None)

    with pytest.raises(TypeError, match="dependencies"):
        DirectRoute("/v1/x", with_key, methods=["POST"])


def test_a_bug_in_a_direct_endpoint_answers_like_the_framework(client: TestClient) -> None:
    """An unexpected exception in a direct endpoint answers the same 500 error body (its incident id aside)."""
    quiet = TestClient(client.app, raise_server_exceptions=False)
    answers = [quiet.post(f"/v1/{way}/exec", json={"code": "break"}) for way in ("direct", "framework")]
    assert [a.status_code for a in answers] == [500, 500]
    errors = [a.json()["error"] for a in answers]
    assert errors[0]["code"] == errors[1]["code"] and errors[0]["error_type"] == errors[1]["error_type"]
    assert errors[0]["message"].split("(incident")[0] == errors[1]["message"].split("(incident")[0]


def test_a_direct_route_refuses_an_endpoint_that_answers_no_response() -> None:
    """A direct route sends what its endpoint returns as it is: that must be a Response."""

    async def plain(body: ExecRequest) -> dict[str, object]:
        return {}

    with pytest.raises(TypeError, match="Response"):
        DirectRoute("/v1/x", plain, methods=["POST"])


GATE_CASES: list[tuple[bytes, dict[str, str]]] = [
    (b'{"code": "return 1"}', {**JSON, "origin": "http://evil.example"}),  # a rebound page's Origin
    (b'{"code": "return 1"}', {**JSON, "host": "evil.example"}),
    (b'{"code": "' + b"x" * (3 * 1024 * 1024) + b'"}', JSON),  # over the exec body cap
    (b"[" * 200 + b"]" * 200, JSON),  # nested deeper than the gate decodes
]


@pytest.mark.parametrize("body,headers", GATE_CASES)
def test_gate_refusals_answer_alike_through_the_door(client: TestClient, body: bytes, headers: dict[str, str]) -> None:
    """The door keeps the gate: a refused request answers the same status, headers and body on both routes."""
    direct = client.post("/v1/direct/exec", content=body, headers=headers)
    framework = client.post("/v1/framework/exec", content=body, headers=headers)
    assert direct.status_code == framework.status_code >= 400
    assert direct.headers == framework.headers
    assert direct.content == framework.content


def test_a_bug_reaches_the_server_through_the_door_as_through_the_framework(client: TestClient) -> None:
    """After answering 500, the door raises the endpoint's exception for the server to log, as the framework does."""
    for way in ("direct", "framework"):
        with pytest.raises(RuntimeError, match="a bug"):
            client.post(f"/v1/{way}/exec", json={"code": "break"})


def test_the_door_stays_shut_for_a_stack_it_does_not_stand_in_for(tmp_path: Any) -> None:
    """A middleware the door does not know of (here one that tags answers) keeps every request on the stack."""
    settings = Settings(data_dir=str(tmp_path)).check()

    async def tagged(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        response.headers["x-tagged"] = "1"
        return response

    decoder = BodyDecoder(helper_pool())  # only small bodies here: no helper is started
    app = FastAPI(openapi_url=None)
    install_error_handlers(app, Twins().add_routes(app.router))
    app.add_middleware(
        RequestGate, keys=KeyRing(settings), caps=BodyCaps(settings), decoder=decoder, metrics_require_key=False
    )
    app.middleware("http")(tagged)
    door_app = with_door(app)
    answer = TestClient(door_app).post("/v1/direct/exec", json={"code": "return 1"})
    assert answer.headers["x-tagged"] == "1" and answer.json()["took"] == "direct"
    assert door_app.door is not None and door_app.door.gate is None
