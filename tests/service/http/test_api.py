"""HTTP surface: body caps, field errors, ops endpoints, and the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.routing import WebSocketRoute

from service.http.cell_app import CellApp
from service.http.request_gate import GatedRoute, RequestGate
from tests.conftest import run

CELL_ENDPOINTS = [
    ("/v1/exec", "post"),
    ("/v1/cells/{cell_id}/wait", "post"),
    ("/v1/cells/{cell_id}/cancel", "post"),
    ("/v1/cells/{cell_id}", "get"),
]


def _error(r, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert isinstance(err["code"], str) and err["code"]
    assert isinstance(err["message"], str) and err["message"]
    assert err["error_type"] in ("recoverable", "config", "transient")
    assert "internal error, contact" not in err["message"].lower()
    return err


def test_exec_body_over_2_mib_is_413(client):
    """An exec body over 2 MiB answers 413 with the service error body."""
    err = _error(client.post("/v1/exec", json={"code": "//" + "x" * (2 * 1024 * 1024)}), 413)
    assert "2097152" in err["message"] or "2 MiB" in err["message"]


def test_exec_body_just_under_the_cap_is_not_413(client):
    """A 1 MiB code string (the field limit) is accepted by the body cap."""
    r = client.post("/v1/exec", json={"code": "return 1 //" + "x" * (1024 * 1024 - 20)})
    assert r.status_code == 200, r.text[:300]


@pytest.mark.parametrize(
    "body,param",
    [
        ({"code": "return 1", "timeout_ms": 5}, "timeout_ms"),
        ({"code": "return 1", "timeout_ms": 60001}, "timeout_ms"),
        ({"code": "return 1", "memory_limit_bytes": 1000}, "memory_limit_bytes"),
        ({"code": "return 1", "max_output_bytes": 10}, "max_output_bytes"),
        ({"code": "   "}, "code"),
        ({}, "code"),
        ({"code": "return 1", "session_id": "bad id!"}, "session_id"),
        ({"code": "return 1", "title": "t" * 121}, "title"),
        ({"code": "return 1", "surprise": True}, "surprise"),
    ],
)
def test_bad_exec_field_is_422_naming_it(client, body, param):
    """A bad exec field answers 422 whose need_param names the field."""
    err = _error(client.post("/v1/exec", json=body), 422)
    assert err["need_param"] == param
    assert err["error_type"] == "recoverable"


def test_non_json_body_is_422(client):
    """A body that is not JSON answers 422 with the error body."""
    r = client.post("/v1/exec", content=b"not json", headers={"content-type": "application/json"})
    _error(r, 422)


def test_bad_wait_timeout_is_422(client):
    """A wait with an out-of-range timeout_ms answers 422 naming timeout_ms."""
    env = run(client, "return await yield_control()")
    assert env["status"] == "waiting", env
    err = _error(client.post(f"/v1/cells/{env['cell_id']}/wait", json={"timeout_ms": 1}), 422)
    assert err["need_param"] == "timeout_ms"
    done = client.post(f"/v1/cells/{env['cell_id']}/wait", json={}).json()
    assert done["status"] == "completed"


def test_unknown_route_is_404_with_error_body(client):
    """An unknown path answers 404 with the one error body shape."""
    _error(client.get("/v1/nothing-here"), 404)


def test_healthz_and_readyz(client):
    """/healthz answers ok and /readyz reports the worker pool and store ready."""
    assert client.get("/healthz").status_code == 200
    r = client.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "ok"


def test_metrics_exposes_cell_counters(client):
    """/metrics is Prometheus text and counts cells in codemode_cells_total."""
    run(client, "return 1")
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    assert 'codemode_cells_total{status="completed"}' in r.text
    assert "# TYPE codemode_cells_total counter" in r.text


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in schema and seen < 10:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
        seen += 1
    return schema


def _has_example(doc: dict[str, Any], media: dict[str, Any]) -> bool:
    if "example" in media or media.get("examples"):
        return True
    schema = media.get("schema", {})
    candidates = [schema] + list(schema.get("anyOf", [])) + list(schema.get("oneOf", []))
    for cand in candidates:
        resolved = _resolve(doc, cand)
        if "example" in resolved or resolved.get("examples"):
            return True
    return False


@pytest.mark.parametrize("path,method", CELL_ENDPOINTS)
def test_openapi_has_an_example_per_cell_endpoint(client, path, method):
    """Each cell endpoint documents an example for its request body (if any) and its 200 answer."""
    doc = client.get("/openapi.json").json()
    op = doc["paths"][path][method]
    body = op.get("requestBody")
    if body is not None:
        assert _has_example(doc, body["content"]["application/json"]), f"{method} {path} request"
    ok = op["responses"]["200"]["content"]["application/json"]
    assert _has_example(doc, ok), f"{method} {path} 200 response"


def test_openapi_documents_service_error_answers(client):
    """The cell endpoints document 404/409/413/422/429 with the error body schema."""
    doc = client.get("/openapi.json").json()
    responses = doc["paths"]["/v1/cells/{cell_id}/wait"]["post"]["responses"]
    for status in ("404", "409", "413", "422", "429"):
        assert status in responses, status


def test_wait_body_over_inbox_plus_1_mib_is_413(client):
    """A wait body over the inbox allowance plus 1 MiB answers 413 before the cell is touched."""
    env = run(client, "return await yield_control()")
    assert env["status"] == "waiting", env
    huge = {"tool_results": [{"id": "req_1", "ok": True, "value": "x" * (11 * 1024 * 1024 + 16)}]}
    _error(client.post(f"/v1/cells/{env['cell_id']}/wait", json=huge), 413)
    done = client.post(f"/v1/cells/{env['cell_id']}/wait", json={}).json()
    assert done["status"] == "completed", done


def test_the_served_apps_cell_routes_lead_and_read_the_gates_decoding(client):
    """The cell routes' requests are answered by their plain ASGI app, right inside the request gate; the
    routes themselves are the app's first (a cell request the cell app passes on is matched against no other
    route first), and every API route is a ``GatedRoute``, which reads the body the request gate decoded."""
    assert [m.cls for m in client.app.user_middleware] == [RequestGate, CellApp]
    routes = client.app.router.routes
    assert [(route.path, sorted(route.methods)) for route in routes[: len(CELL_ENDPOINTS)]] == [
        (path, [method.upper()]) for path, method in CELL_ENDPOINTS
    ]
    api = [route for route in routes if getattr(route, "path", "").startswith("/v1/")]
    # /v1/monty is a WebSocket: no body to decode, its upgrade admitted by the route itself (monty_route.py).
    sockets = [route.path for route in api if isinstance(route, WebSocketRoute)]
    assert sockets == ["/v1/monty"], sockets
    http = [route for route in api if not isinstance(route, WebSocketRoute)]
    assert len(http) > len(CELL_ENDPOINTS) and all(isinstance(route, GatedRoute) for route in http)
