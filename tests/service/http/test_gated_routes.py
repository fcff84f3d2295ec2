"""Gated routes take the body the request gate decoded, and that changes no verdict.

Each endpoint is served twice behind the real request gate and error handlers, with the real exec and
wait request models: ``/v1/gated/...`` by a ``GatedRoute`` (as every route of the served app), whose body
is the JSON the gate decoded, and ``/v1/plain/...`` by FastAPI's own ``APIRoute``, which parses the body
again from its bytes.  For every body, valid or not, both must answer the same status and error body;
the gated one must have been handed the gate's decoding (a wait's tool result values kept as raw JSON),
where the plain one parsed the text a second time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
from fastapi import FastAPI, Path, Request
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from service.api.schemas import ID_PATTERN, ExecRequest, WaitRequest
from service.auth import KeyRing
from service.errors import NotFound
from service.http.body_limits import BodyCaps
from service.http.error_responses import install_error_handlers
from service.http.request_gate import GatedRoute, RequestGate
from service.http.request_json import BodyDecoder
from service.http.responses import JSONBytes
from service.runtime.dispatch import RawJson
from service.settings import Settings
from tests.support.helper_pools import helper_pool

CellId = Annotated[str, Path(pattern=ID_PATTERN)]
GOOD_ID = "c" * 12


async def exec_endpoint(body: ExecRequest, request: Request) -> JSONBytes:
    if body.code == "refuse":
        raise NotFound("no such thing")
    if body.code == "break":
        raise RuntimeError("a bug")
    return JSONBytes({"body": body.model_dump(mode="json")})


async def wait_endpoint(cell_id: CellId, request: Request, body: WaitRequest | None = None) -> JSONBytes:
    if body is None:
        return JSONBytes({"id": cell_id, "body": None})
    # Each result value as the route was handed it: the gate's raw JSON, or a value parsed again.
    results = [
        (r.id, r.ok, "raw" if isinstance(r.value, RawJson) else "parsed", _compact(r.value)) for r in body.tool_results
    ]
    return JSONBytes({"id": cell_id, "body": {"timeout_ms": body.timeout_ms, "results": results}})


def _compact(value: object) -> str:
    if isinstance(value, RawJson):
        return value.data.decode()
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("gated"))).check()
    helpers = helper_pool()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        yield
        await helpers.close()

    app = FastAPI(lifespan=lifespan, openapi_url=None)
    for way, route_class in (("gated", GatedRoute), ("plain", APIRoute)):
        app.router.add_api_route(f"/v1/{way}/exec", exec_endpoint, methods=["POST"], route_class_override=route_class)
        app.router.add_api_route(
            f"/v1/{way}/{{cell_id}}/wait", wait_endpoint, methods=["POST"], route_class_override=route_class
        )
    install_error_handlers(app, app.router.routes)
    app.add_middleware(
        RequestGate,
        keys=KeyRing(settings),
        caps=BodyCaps(settings),
        decoder=BodyDecoder(helpers),
        metrics_require_key=False,
    )
    with TestClient(app) as c:
        yield c


JSON = {"content-type": "application/json"}
EXEC_BODIES: list[tuple[bytes, dict[str, str]]] = [
    (b'{"code": "return 1"}', JSON),
    (b'{"code": "return 1", "timeout_ms": 2000, "title": "t", "background": true}', JSON),
    (b'{"code": "return 1"}', {"content-type": "application/vnd.codemode+json; charset=utf-8"}),
    (b'{"code": "refuse"}', JSON),  # the endpoint raises a service error
    (b'{"code": "return 1", "timeout_ms": "2000"}', JSON),  # lax: the framework converts it
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
def test_exec_routes_answer_alike(client: TestClient, body: bytes, headers: dict[str, str]) -> None:
    """A gated exec route answers every body exactly as FastAPI's own route does (status and body)."""
    gated = client.post("/v1/gated/exec", content=body, headers=headers)
    plain = client.post("/v1/plain/exec", content=body, headers=headers)
    assert gated.status_code == plain.status_code
    assert gated.json() == plain.json()


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


def _without_kinds(answer: dict[str, Any]) -> dict[str, Any]:
    body = answer.get("body")
    if isinstance(body, dict) and "results" in body:
        body = {**body, "results": [[i, ok, text] for i, ok, _, text in body["results"]]}
    return {**answer, "body": body}


@pytest.mark.parametrize("cell_id,body", WAIT_CASES)
def test_wait_routes_answer_alike(client: TestClient, cell_id: str, body: bytes) -> None:
    """A gated wait route (path parameter and optional body) answers as FastAPI's own route does."""
    gated = client.post(f"/v1/gated/{cell_id}/wait", content=body, headers=JSON)
    plain = client.post(f"/v1/plain/{cell_id}/wait", content=body, headers=JSON)
    assert gated.status_code == plain.status_code
    if gated.status_code == 200:
        assert _without_kinds(gated.json()) == _without_kinds(plain.json())
    else:
        assert gated.json() == plain.json()


def test_a_gated_route_is_handed_the_gates_decoding_not_a_second_parse(client: TestClient) -> None:
    """A wait's tool result values reach a gated route as the gate left them (raw JSON text, compact), where
    FastAPI's own route parses them again into Python values."""
    body = b'{"tool_results": [{"id": "t1", "ok": true, "value": {"a": [1, 2.5, "\\u00e9"]}}]}'
    gated = client.post(f"/v1/gated/{GOOD_ID}/wait", content=body, headers=JSON).json()
    plain = client.post(f"/v1/plain/{GOOD_ID}/wait", content=body, headers=JSON).json()
    assert gated["body"]["results"] == [["t1", True, "raw", '{"a":[1,2.5,"é"]}']]
    assert plain["body"]["results"] == [["t1", True, "parsed", '{"a":[1,2.5,"é"]}']]


def test_a_bug_in_a_gated_endpoint_answers_the_500_body_and_reaches_the_server(client: TestClient) -> None:
    """An unexpected exception answers the one 500 error body (an incident id, not the exception's text),
    and is raised on to the server, which logs it."""
    quiet = TestClient(client.app, raise_server_exceptions=False)
    answer = quiet.post("/v1/gated/exec", json={"code": "break"})
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert "incident" in error["message"] and "a bug" not in error["message"]
    with pytest.raises(RuntimeError, match="a bug"):
        client.post("/v1/gated/exec", json={"code": "break"})
