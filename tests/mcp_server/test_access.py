"""Who may use the facade: the HTTP API's keys and tenants over `/mcp`, the key of `codemode mcp`,
and loopback-only Host checks on a server without keys."""

from __future__ import annotations

import json
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from tests.conftest import make_client
from tests.mcp_server.conftest import ALPHA, BETA, http_client, stdio_parameters, stdio_session
from tests.support.ports import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
SESSION = "mcp-session-id"


def answer_of(response: httpx.Response) -> Any:
    """The JSON-RPC message of an answer: a JSON body (2026-07-28), or the last event of a session's stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        return json.loads([line for line in response.text.splitlines() if line.startswith("data: ")][-1][6:])
    return response.json()


async def test_a_second_tenant_sees_only_its_own_catalog_and_cells(base_url: str) -> None:
    """beta's policy denies quote_shipping and the docs server: its exec description, resources and
    search leave them out, its cells cannot call them, and alpha's cell ids are unknown to it."""
    async with http_client(base_url, ALPHA) as alpha:
        parked = await alpha.call_tool("exec", {"code": "await yield_control('hold'); return 1"})
        assert parked.structured_content is not None and parked.structured_content["status"] == "waiting"
        alpha_cell = parked.structured_content["cell_id"]
    async with http_client(base_url, BETA) as beta:
        tools = {t.name: t for t in (await beta.list_tools()).tools}
        assert (
            "- quote_shipping {" not in tools["exec"].description and "- list_carriers {" in tools["exec"].description
        )
        uris = {str(r.uri) for r in (await beta.list_resources()).resources}
        assert "codemode://api/tools/list_carriers.d.ts" in uris
        assert not {u for u in uris if "quote_shipping" in u or u.startswith("codemode://api/mcp/")}
        found = await beta.call_tool("search_tools", {"query": "shipping quote echo"})
        assert found.structured_content is not None
        names = [h["callableName"] for h in found.structured_content["tools"]]
        assert "quote_shipping" not in names and not [n for n in names if n.startswith("MCP.")]
        denied = await beta.call_tool("exec", {"code": 'return typeof quote_shipping + " " + typeof MCP.docs'})
        assert denied.structured_content is not None and denied.structured_content["value"] == "undefined undefined"
        for tool in ("wait", "cancel"):
            foreign = await beta.call_tool(tool, {"cell_id": alpha_cell})
            assert foreign.is_error is True and "cell_not_found" in foreign.content[0].text
    async with http_client(base_url, ALPHA) as alpha:  # the owner still has it
        done = await alpha.call_tool("wait", {"cell_id": alpha_cell})
        assert done.structured_content is not None and done.structured_content["value"] == 1


async def test_a_missing_or_wrong_key_is_refused_before_the_sdk(base_url: str) -> None:
    """Without a valid Bearer key `/mcp` answers 401 with the service's error body, and the SDK
    client cannot connect."""
    for headers in ({}, {"Authorization": "Bearer ck_wrong_0123456789"}, {"Authorization": f"Basic {ALPHA}"}):
        r = httpx.post(base_url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own error types
        async with http_client(base_url, "ck_wrong_0123456789") as client:
            await client.list_tools()
    ok = httpx.post(base_url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {ALPHA}"})
    assert ok.status_code == 200 and answer_of(ok)["result"]["serverInfo"]["name"] == "codemode"
    httpx.delete(base_url + "/mcp", headers={"Authorization": f"Bearer {ALPHA}", SESSION: ok.headers[SESSION]})


def test_an_mcp_body_over_the_exec_cap_is_413(base_url: str) -> None:
    """`/mcp` bodies are capped like exec bodies, before the SDK reads them."""
    r = httpx.post(
        base_url + "/mcp",
        content=b"x" * (2 * 1024 * 1024 + 1),
        headers={**MCP_HEADERS, "Authorization": f"Bearer {ALPHA}"},
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"


def test_a_large_mcp_body_of_many_small_values_is_refused_before_the_sdk(base_url: str) -> None:
    """The SDK parses MCP bodies on the event loop: one over 256 KiB holding more than 10,000 JSON values
    is refused (413) after a count in the helper process; a large body that is one code string is served."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {ALPHA}", "Mcp-Protocol-Version": "2025-06-18"}
    opened = httpx.post(base_url + "/mcp", json=INITIALIZE, headers=headers)
    headers[SESSION] = opened.headers[SESSION]
    results = ",".join(['{"id":"r","ok":true,"value":{}}'] * 20000)
    many = (
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait","arguments":'
        '{"cell_id":"c","tool_results":[' + results + "]}}}"
    )
    assert len(many) > 256 * 1024
    r = httpx.post(base_url + "/mcp", content=many, headers=headers)
    assert r.status_code == 413 and "at most 10000 JSON values" in r.json()["error"]["message"], r.text
    code = "return 7 // " + "x" * 300_000
    one = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "exec", "arguments": {"code": code}}}
    served = httpx.post(base_url + "/mcp", json=one, headers=headers, timeout=60)
    assert served.status_code == 200 and answer_of(served)["result"]["structuredContent"]["value"] == 7, served.text
    httpx.delete(base_url + "/mcp", headers=headers)


def test_each_tenant_keeps_its_own_bounded_table_of_sessions(base_url: str) -> None:
    """2025-11-25 clients get sessions, each tenant at most 4 at once.  At the cap a new session closes the
    tenant's least recently used idle one (a one-shot client leaves its session open): that one is then
    unknown (404), the others go on.  While all four are in use (each holds an open event stream) a new one
    is refused (503), and alpha still opens one: tables are per tenant, and a session id is its tenant's."""

    def headers(key: str, session: str | None = None) -> dict[str, str]:
        more = {SESSION: session} if session else {}
        return {**MCP_HEADERS, "Authorization": f"Bearer {key}", "Mcp-Protocol-Version": "2025-06-18", **more}

    def opened(key: str) -> httpx.Response:
        return httpx.post(base_url + "/mcp", json=INITIALIZE, headers=headers(key))

    def listing(key: str, session: str) -> int:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        return httpx.post(base_url + "/mcp", json=body, headers=headers(key, session), timeout=30).status_code

    betas = [opened(BETA).headers[SESSION] for _ in range(4)]
    assert [listing(BETA, s) for s in betas[1:]] == [200] * 3  # the first is now the least recently used
    fifth = opened(BETA)
    assert fifth.status_code == 200, fifth.text
    assert listing(BETA, betas[0]) == 404 and listing(BETA, betas[1]) == 200
    live = [*betas[1:], fifth.headers[SESSION]]
    with httpx.Client(timeout=30) as http, ExitStack() as streams:
        for session in live:
            stream = streams.enter_context(http.stream("GET", base_url + "/mcp", headers=headers(BETA, session)))
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        full = opened(BETA)
        assert full.status_code == 503 and "Too many open sessions" in full.text, full.text
        alpha = opened(ALPHA)
        assert alpha.status_code == 200, alpha.text
        assert listing(BETA, alpha.headers[SESSION]) == 404
    for key, session in [(BETA, s) for s in live] + [(ALPHA, alpha.headers[SESSION])]:
        assert httpx.delete(base_url + "/mcp", headers=headers(key, session)).status_code == 200


async def test_stdio_serves_the_tenant_of_its_api_key(config_file: Path, tmp_path: Path) -> None:
    """`codemode mcp` with CODEMODE_API_KEY=<beta's key> serves beta's catalog."""
    async with stdio_session(config_file, tmp_path, BETA) as beta:
        tools = {t.name: t for t in (await beta.list_tools()).tools}
        assert (
            "- quote_shipping {" not in tools["exec"].description and "- list_carriers {" in tools["exec"].description
        )
        uris = {str(r.uri) for r in (await beta.list_resources()).resources}
        assert "codemode://api/tools/quote_shipping.d.ts" not in uris and "codemode://api/mcp/docs.d.ts" not in uris


def test_stdio_refuses_an_unknown_api_key(config_file: Path, tmp_path: Path) -> None:
    """An unknown CODEMODE_API_KEY stops `codemode mcp` at start with the reason on stderr, nothing on stdout."""
    params = stdio_parameters(config_file, tmp_path, "ck_wrong_0123456789")
    done = subprocess.run(
        [params.command, *params.args], env=params.env, cwd=params.cwd, input=b"", capture_output=True, timeout=60
    )
    assert done.returncode == 3 and done.stdout == b""
    assert b"unknown API key" in done.stderr


async def test_stdio_answers_initialize_before_its_start_and_a_call_hears_why_the_start_failed(
    config_file: Path, tmp_path: Path
) -> None:
    """`codemode mcp` answers ``initialize`` and lists its tools while the services start (a desktop client
    shows the server at once); when the start then fails (here: a session store that does not answer), a
    tool call is answered the reason, and the command exits with the start-up failure status."""
    params = stdio_parameters(config_file, tmp_path, None)
    assert params.env is not None
    params.env["CODEMODE_STORE_URL"] = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    async with Client(stdio_client(params)) as client:
        assert "exec" in {t.name for t in (await client.list_tools()).tools}
        answer = await client.call_tool("exec", {"code": "return 1"})
        assert answer.is_error and "does not answer" in answer.content[0].text, answer
    done = subprocess.run(
        [params.command, *params.args], env=params.env, cwd=params.cwd, input=b"", capture_output=True, timeout=60
    )
    assert done.returncode == 3 and b"cannot start: session store" in done.stderr, done.stderr


def test_without_keys_only_loopback_hosts_reach_the_facade(tmp_path: Path) -> None:
    """A server without API keys serves /mcp only to requests naming a loopback Host and Origin (no DNS
    rebinding): the request gate's 421 with the error body, as on every other route."""
    with make_client(tmp_path, workers=1) as client:
        rebound = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "evil.example:8000"})
        assert rebound.status_code == 421 and rebound.json()["error"]["code"] == "host_not_allowed", rebound.text
        local = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "127.0.0.1:8000"})
        assert local.status_code == 200 and answer_of(local)["result"]["serverInfo"]["name"] == "codemode"
        foreign_origin = client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "127.0.0.1:8000", "Origin": "http://evil.example"}
        )
        assert foreign_origin.status_code == 421 and "Origin" in foreign_origin.json()["error"]["message"]
