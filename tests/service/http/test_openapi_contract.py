"""The OpenAPI document against live answers, checked by an independent validator (openapi-core).

A real ``codemode serve`` (plugins, an MCP server, the SQLite session store) answers one request of
every kind the HTTP API reference's route table gives (docs/reference/http-api.md); openapi-core finds each URL's operation in
``/openapi.json`` (a URL no path template describes fails), validates the request, and validates the
answer's status, media type and body against the documented schema (``additionalProperties: false``
in the models, so an undocumented field fails too).  Declaration files are read at every depth the
table has: ``results.d.ts``, ``tools/<name>.d.ts``, ``mcp/index.d.ts``, ``mcp/<server>.d.ts``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_core import Config, OpenAPI
from openapi_core.templating.paths.exceptions import PathNotFound
from openapi_core.testing import MockRequest, MockResponse

from tests.mcp.conftest import SERVER_SCRIPT
from tests.support.live_server import codemode_serve
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

HTTP_API_PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "http-api.md"
CONFIG = f"""
[tools]
plugins = ["service.demo.shipping", "tests.support.echo_plugin"]

[mcp.servers.docs]
command = {sys.executable!r}
args = [{SERVER_SCRIPT!r}, "stdio"]
"""
WEATHER = {"name": "get_weather", "input_schema": {"type": "object"}}
#: Routes the route table lists that are not part of the OpenAPI document, and why.
NOT_OPENAPI = {
    "/mcp": "MCP's JSON-RPC, described by the MCP specification",
    "/docs": "the page that renders the document",
    "/openapi.json": "the document itself",
    "/playground": "an HTML page, not an API operation",
    "/": "a redirect to the playground",
}


class Live:
    """Sends requests to the live server; every request and answer is validated against its OpenAPI document."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=60)
        # An event stream is one string to OpenAPI (its frames are checked by the event-stream tests).
        config = Config(extra_media_type_deserializers={"text/event-stream": lambda data, **_: data.decode("utf-8")})
        self.document = self.http.get("/openapi.json").json()
        self.openapi = OpenAPI.from_dict(self.document, config=config)

    def call(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> httpx.Response:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json"} if data is not None else {}
        r = self.http.request(method, path, content=data, params=params, headers=headers)
        request = MockRequest(self.base, method, path, args=params, data=data, headers=headers)
        self.openapi.validate_request(request)
        media = r.headers.get("content-type", "").split(";", 1)[0]
        self.openapi.validate_response(request, MockResponse(r.content, r.status_code, dict(r.headers), media))
        return r

    def ok(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> Any:
        r = self.call(method, path, body, params)
        assert r.status_code == 200, (method, path, r.text)
        return r.json() if r.headers["content-type"].startswith("application/json") else r.text


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with codemode_serve(tmp_path_factory.mktemp("openapi"), config=CONFIG) as base:
        client = Live(base)
        yield client
        client.http.close()


def test_cell_routes_answer_what_the_document_says(live: Live) -> None:
    """exec (completed, waiting, background), status, wait with tool results, cancel, events, and
    the error body of an unknown cell all match their operations."""
    assert live.ok("POST", "/v1/exec", {"code": 'text("hi"); return 1 + 1'})["value"] == 2
    parked = live.ok("POST", "/v1/exec", {"code": "return (await get_weather({})).t", "client_tools": [WEATHER]})
    assert parked["status"] == "waiting"
    cell = parked["cell_id"]
    assert live.ok("GET", f"/v1/cells/{cell}")["status"] == "waiting"
    [call] = parked["pending_tool_calls"]
    done = live.ok(
        "POST", f"/v1/cells/{cell}/wait", {"tool_results": [{"id": call["id"], "ok": True, "value": {"t": 3}}]}
    )
    assert done["value"] == 3
    other = live.ok("POST", "/v1/exec", {"code": "await yield_control('x'); return 1"})
    assert live.ok("POST", f"/v1/cells/{other['cell_id']}/cancel")["code"] == "aborted"
    background = live.ok("POST", "/v1/exec", {"code": "return 5", "background": True})
    stream = live.ok("GET", f"/v1/cells/{background['cell_id']}/events")
    assert "event: envelope" in stream
    missing = live.call("GET", "/v1/cells/cell_00000000-0000-4000-8000-000000000000")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "cell_not_found"
    bad = live.call("POST", "/v1/exec", {"code": " "})
    assert bad.status_code == 422


def test_catalog_and_every_declaration_file_match_the_document(live: Live) -> None:
    """The catalog, the file list (whole and by prefix) and every listed file, one and two segments
    deep, are operations of the document with answers that match their schemas."""
    catalog = live.ok("GET", "/v1/catalog", params={"session_id": "s1"})
    assert {"quote_shipping", "fail"} <= {t["callableName"] for t in catalog["tools"]}
    files = live.ok("GET", "/v1/api/files")["files"]
    paths = {f["path"] for f in files}
    assert {"results.d.ts", "tools/quote_shipping.d.ts", "mcp/index.d.ts", "mcp/docs.d.ts"} <= paths, paths
    assert {f["path"] for f in live.ok("GET", "/v1/api/files", params={"prefix": "mcp"})["files"]} == {
        "mcp/index.d.ts",
        "mcp/docs.d.ts",
    }
    for path in sorted(paths):
        assert live.ok("GET", f"/v1/api/files/{path}")["path"] == path
    unknown = live.call("GET", "/v1/api/files/tools/no_such_tool.d.ts")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    # No declaration is three segments deep: no operation describes such a URL (the validator says so),
    # and the service answers it with the error body.
    with pytest.raises(PathNotFound):
        live.call("GET", "/v1/api/files/a/b/c.d.ts")
    assert live.http.get("/v1/api/files/a/b/c.d.ts").json()["error"]["code"] == "not_found"


def test_session_and_run_routes_match_the_document(live: Live) -> None:
    """Run counters with a failure and a saved result, the session store, ending the run and deleting
    the session answer what their response models say."""
    code = """await store("cursor", {page: 2});
    await results.save({rows: [1, 2, 3]});
    try { await fail({}); } catch (e) {}
    return 1"""
    assert live.ok("POST", "/v1/exec", {"code": code, "session_id": "s1", "run_id": "r1"})["status"] == "completed"
    run = live.ok("GET", "/v1/sessions/s1/runs/r1")
    assert run["saved_results"]["count"] == 1 and run["total_failures"] >= 1 and run["failures"], run
    assert live.ok("GET", "/v1/sessions/s1/store")["keys"] == [{"key": "cursor", "bytes": 10}]
    assert live.ok("DELETE", "/v1/sessions/s1/runs/r1")["expired_results"] == 1
    assert live.ok("DELETE", "/v1/sessions/s1")["deleted"] is True
    gone = live.call("DELETE", "/v1/sessions/s1")
    assert gone.status_code == 404


def test_ops_routes_match_the_document(live: Live) -> None:
    """Liveness, readiness (a readiness body, not the error body) and the metrics text."""
    assert live.ok("GET", "/healthz") == {"status": "ok"}
    poll_until(lambda: live.call("GET", "/readyz").status_code == 200, "readyz answers 200")
    assert "codemode_event_loop_lag_seconds" in live.ok("GET", "/metrics")


def test_every_url_of_the_route_table_is_an_operation(live: Live) -> None:
    """Each ``METHOD /path`` of the HTTP API reference's route table is an operation of the document, path
    parameters included (``{dir}/{name}``: nested declaration files), except the MCP endpoint."""
    text = HTTP_API_PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Routes") : text.index("## OpenAPI")]
    table = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    documented = {
        (method, re.sub(r"\{[^}]+\}", "{}", path))
        for method, path in re.findall(r"`(GET|POST|DELETE) (/[^`?\[\s]*)", table)
        if path not in NOT_OPENAPI
    }
    paths = live.document["paths"]
    described = {(m.upper(), re.sub(r"\{[^}]+\}", "{}", p)) for p, ops in paths.items() for m in ops}
    assert documented and documented <= described, sorted(documented - described)
    assert ("GET", "/v1/api/files/{}/{}") in documented
