"""The cell routes' plain ASGI app (``CellApp``) answers exactly as FastAPI's routes do.

Two apps share one set of cell endpoints with the real signatures, request models and path check (stubs
that echo what they were handed, or fail on request), the real request gate and error table; one has
``CellApp`` inside its gate, as the served app does.  For every request, valid or not, both must answer
the same status, headers and body; ``CellApp`` must have answered exactly the requests it binds (the
endpoint sees a plain ``Request``, where FastAPI hands it the gate's ``GatedRequest``), and passed the
rest on to FastAPI.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from service.api.schemas import ExecRequest, WaitRequest
from service.auth import KeyRing
from service.errors import NotFound
from service.http.body_limits import BodyCaps
from service.http.cell_app import CellApp
from service.http.cell_routes import CellId
from service.http.error_responses import install_error_handlers
from service.http.request_gate import RequestGate
from service.http.request_json import BodyDecoder
from service.http.responses import JSONBytes
from service.http.route_group import RouteGroup, route
from service.runtime.dispatch import RawJson
from service.settings import Settings
from service.stores.errors import StoreError
from tests.support.helper_pools import helper_pool

GOOD_ID = "c" * 12


def _answer(request: Request, **fields: Any) -> JSONBytes:
    # CellApp hands endpoints a plain Request; FastAPI's gated routes their own request class.
    return JSONBytes({**fields, "by": "cell app" if type(request) is Request else "fastapi"})


def _fail_as(code: str) -> None:
    if code == "refuse":
        raise NotFound("no such thing")
    if code == "store":
        raise StoreError("disk full")
    if code == "break":
        raise RuntimeError("a bug with a secret in its text")


class StubCellRoutes(RouteGroup):
    """The four cell routes with CellRoutes' paths and signatures, echoing what they are handed."""

    @route("POST", "/v1/exec", operation_id="exec_cell")
    async def exec_cell(self, body: ExecRequest, request: Request) -> JSONBytes:
        _fail_as(body.code)
        return _answer(request, body=body.model_dump(mode="json"))

    @route("POST", "/v1/cells/{cell_id}/wait", operation_id="wait_cell")
    async def wait_cell(self, cell_id: CellId, request: Request, body: WaitRequest | None = None) -> JSONBytes:
        if body is None:
            return _answer(request, id=cell_id, body=None)
        results = [
            (r.id, r.ok, r.value.data.decode() if isinstance(r.value, RawJson) else r.value) for r in body.tool_results
        ]
        return _answer(request, id=cell_id, timeout_ms=body.timeout_ms, results=results)

    @route("POST", "/v1/cells/{cell_id}/cancel", operation_id="cancel_cell")
    async def cancel_cell(self, cell_id: CellId, request: Request) -> JSONBytes:
        _fail_as(cell_id.rstrip("0"))  # "refuse00000000": long enough to be an id
        return _answer(request, id=cell_id, cancelled=True)

    @route("GET", "/v1/cells/{cell_id}", operation_id="get_cell")
    async def cell_status(self, cell_id: CellId, request: Request) -> JSONBytes:
        return _answer(request, id=cell_id, status="completed")

    @route("DELETE", "/v1/cells/{cell_id}", operation_id="delete_cell")
    async def delete_cell(self, cell_id: CellId, request: Request) -> JSONBytes:
        return _answer(request, id=cell_id, deleted=True)


def _app(settings: Settings, decoder: BodyDecoder, *, cell_app: bool, lifespan: Any = None) -> FastAPI:
    routes = StubCellRoutes()
    app = FastAPI(lifespan=lifespan, openapi_url=None)
    install_error_handlers(app, routes.add_routes(app.router))
    if cell_app:
        app.add_middleware(CellApp, routes=routes)
    app.add_middleware(
        RequestGate, keys=KeyRing(settings), caps=BodyCaps(settings), decoder=decoder, metrics_require_key=False
    )
    return app


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, TestClient]]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("cell-app"))).check()
    helpers = helper_pool()
    decoder = BodyDecoder(helpers)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        yield
        await helpers.close()

    fast = _app(settings, decoder, cell_app=True, lifespan=lifespan)
    plain = _app(settings, decoder, cell_app=False)
    with TestClient(fast, raise_server_exceptions=False) as a, TestClient(plain, raise_server_exceptions=False) as b:
        yield a, b


JSON = {"content-type": "application/json"}
#: (method, path, body, headers, who answers with CellApp in place)
REQUESTS: list[tuple[str, str, bytes | None, dict[str, str], str]] = [
    ("POST", "/v1/exec", b'{"code": "return 1"}', JSON, "cell app"),
    (
        "POST",
        "/v1/exec",
        b'{"code": "return 1", "timeout_ms": 2000, "title": "t", "background": true}',
        JSON,
        "cell app",
    ),
    ("POST", "/v1/exec", b'{"code": "return 1"}', {"content-type": "application/vnd.codemode+json"}, "cell app"),
    ("POST", "/v1/exec", b'{"code": "return 1", "timeout_ms": "2000"}', JSON, "cell app"),  # lax, as FastAPI
    ("POST", "/v1/exec", b'{"code": "refuse"}', JSON, "error"),
    ("POST", "/v1/exec", b'{"code": "store"}', JSON, "error"),
    ("POST", "/v1/exec", b'{"code": "return 1", "timeout_ms": 5}', JSON, "cell app"),  # the registry's to refuse
    ("POST", "/v1/exec", b'{"code": "   "}', JSON, "error"),
    ("POST", "/v1/exec", b'{"code": "return 1", "surprise": 1}', JSON, "error"),
    ("POST", "/v1/exec", b"{}", JSON, "error"),
    ("POST", "/v1/exec", b"null", JSON, "error"),
    ("POST", "/v1/exec", b"[]", JSON, "error"),
    ("POST", "/v1/exec", b"7", JSON, "error"),
    ("POST", "/v1/exec", b'{"code": "return 1"}', {}, "error"),  # no content type: not JSON to FastAPI
    ("POST", "/v1/exec", b'{"code": "return 1"}', {"content-type": "text/plain"}, "error"),
    ("POST", "/v1/exec", b"", JSON, "error"),
    ("POST", "/v1/exec", b"{not json", JSON, "error"),
    ("PUT", "/v1/exec", b'{"code": "return 1"}', JSON, "error"),  # 405
    ("POST", "/v1/exec/", b'{"code": "return 1"}', JSON, "error"),
    ("POST", f"/v1/cells/{GOOD_ID}/wait", b'{"timeout_ms": 2000}', JSON, "cell app"),
    (
        "POST",
        f"/v1/cells/{GOOD_ID}/wait",
        b'{"tool_results": [{"id": "t1", "ok": true, "value": {"a": [1]}}]}',
        JSON,
        "cell app",
    ),
    ("POST", f"/v1/cells/{GOOD_ID}/wait", b"{}", JSON, "cell app"),
    ("POST", f"/v1/cells/{GOOD_ID}/wait", b"", JSON, "fastapi"),  # no body: FastAPI binds None
    ("POST", f"/v1/cells/{GOOD_ID}/wait", b"null", JSON, "fastapi"),
    ("POST", f"/v1/cells/{GOOD_ID}/wait", b'{"timeout_ms": 1}', JSON, "cell app"),
    ("POST", f"/v1/cells/{GOOD_ID}/wait", b'{"tool_results": [{"id": "t1", "ok": "maybe"}]}', JSON, "error"),
    ("POST", "/v1/cells/bad%20id!/wait", b'{"timeout_ms": 2000}', JSON, "error"),
    ("POST", "/v1/cells/" + "x" * 300 + "/wait", b"{}", JSON, "error"),
    ("POST", f"/v1/cells/{GOOD_ID}/cancel", None, {}, "cell app"),
    ("POST", f"/v1/cells/{GOOD_ID}/cancel", b'{"ignored": true}', JSON, "cell app"),
    ("POST", "/v1/cells/refuse00000000/cancel", None, {}, "error"),
    ("POST", "/v1/cells/store0000000/cancel", None, {}, "error"),
    ("POST", "/v1/cells/bad%20id!/cancel", None, {}, "error"),
    ("POST", f"/v1/cells/{GOOD_ID}/other", None, {}, "error"),
    ("GET", f"/v1/cells/{GOOD_ID}/cancel", None, {}, "error"),  # 405
    ("GET", f"/v1/cells/{GOOD_ID}", None, {}, "cell app"),
    ("GET", f"/v1/cells/{GOOD_ID}?verbose=1", None, {}, "cell app"),
    ("DELETE", f"/v1/cells/{GOOD_ID}", None, {}, "fastapi"),  # another route of the same path
    ("GET", "/v1/cells/bad%20id!", None, {}, "error"),
    ("GET", f"/v1/cells/{GOOD_ID}/", None, {}, "error"),
    ("GET", "/v1/cells/", None, {}, "error"),
    ("POST", f"/v1/cells/{GOOD_ID}", None, {}, "error"),  # 405 naming GET, DELETE
]


@pytest.mark.parametrize("method,path,body,headers,answerer", REQUESTS)
def test_the_cell_app_answers_every_request_as_fastapi_does(
    twins: tuple[TestClient, TestClient],
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    answerer: str,
) -> None:
    """Same status, headers and body with CellApp in place as without; CellApp answered what it binds."""
    fast, plain = twins
    a = fast.request(method, path, content=body, headers=headers, follow_redirects=False)
    b = plain.request(method, path, content=body, headers=headers, follow_redirects=False)
    assert a.status_code == b.status_code
    if answerer == "error":
        assert a.status_code >= 300 and a.content == b.content and a.headers == b.headers
    else:  # the echo says who answered: its length differs by the name
        assert a.status_code == 200 and b.json()["by"] == "fastapi"
        assert a.json() == {**b.json(), "by": answerer}
        assert {**a.headers, "content-length": ""} == {**b.headers, "content-length": ""}


def test_a_bug_in_an_endpoint_answers_the_500_body_and_is_logged_with_its_incident(
    twins: tuple[TestClient, TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    """An unexpected exception answers the one 500 error body (an incident id, never the exception's text),
    as FastAPI's routes do, and the log holds the incident with the traceback."""
    fast, plain = twins
    with caplog.at_level(logging.ERROR, logger="codemode"):
        a = fast.post("/v1/exec", json={"code": "break"})
    b = plain.post("/v1/exec", json={"code": "break"})
    assert a.status_code == b.status_code == 500
    errors = [r.json()["error"] for r in (a, b)]
    assert errors[0]["message"].split("(incident")[0] == errors[1]["message"].split("(incident")[0]
    assert {k: v for k, v in errors[0].items() if k != "message"} == {
        k: v for k, v in errors[1].items() if k != "message"
    }
    assert "secret" not in a.text
    incident = errors[0]["message"].split("(incident ")[1].split(" ")[0]
    logged = [r for r in caplog.records if incident in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None and "/v1/exec" in logged[0].getMessage()


def test_a_store_failure_answers_503_with_retry_after(twins: tuple[TestClient, TestClient]) -> None:
    """A store failure in a cell endpoint answers the table's 503 with its Retry-After, through the cell app."""
    fast, _ = twins
    answer = fast.post("/v1/exec", json={"code": "store"})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert answer.json()["error"]["message"].startswith("session store unavailable: disk full")
