"""Approvals of MCP calls: `mcp:<server>/<tool>` (spelt with the server's own tool name) and `mcp:<server>`.

The SDK-built test server runs over stdio as `docs`; its `create-issue` tool is `MCP.docs.createIssue`
in guests and answers with the arguments it saw.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings import ToolSettings
from service.settings_mcp import McpServerConfig
from tests.conftest import make_client
from tests.mcp.conftest import SERVER_SCRIPT


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    servers = (McpServerConfig(name="docs", command=sys.executable, args=(SERVER_SCRIPT, "stdio"), timeout_ms=10000),)
    with make_client(
        tmp_path_factory.mktemp("mcp-approvals"),
        mcp_servers=servers,
        tools=ToolSettings(approve=("mcp:docs/create-issue",)),
    ) as c:
        yield c


def exec_cell(client: TestClient, code: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/exec", json={"code": code, **fields})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def approve(client: TestClient, env: dict[str, Any], ok: bool, reason: str | None = None) -> dict[str, Any]:
    [entry] = env["pending_tool_calls"]
    r = client.post(
        f"/v1/cells/{env['cell_id']}/wait", json={"approvals": [{"id": entry["id"], "approve": ok, "reason": reason}]}
    )
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


ISSUE = "return (await MCP.docs.createIssue({title: 'leak'})).structuredContent.seen"


def test_mcp_tool_waits_for_approval_then_runs(client):
    env = exec_cell(client, ISSUE)
    assert env["status"] == "waiting", env
    [entry] = env["pending_tool_calls"]
    assert entry["method"] == "approval" and entry["tool"] == "MCP.docs.createIssue"
    assert entry["input"] == {"title": "leak"} and "mcp:docs/create-issue" in entry["reason"]
    assert env["bridge_dispatch_started"] is False
    done = approve(client, env, True)
    assert done["status"] == "completed", done
    assert done["value"] == {"title": "leak", "body": "", "labels": ["triage"]}  # the server saw the call
    assert done["bridge_dispatch_started"] is True


def test_denied_mcp_call_rejects_with_approval_denied(client):
    env = exec_cell(
        client,
        "try { await MCP.docs.createIssue({title: 'x'}); return 'ran'; } "
        "catch (e) { return [e.code, e.message, e.tool]; }",
    )
    done = approve(client, env, False, "duplicate")
    code, message, tool = done["value"]
    assert code == "approval_denied" and message.endswith("approval was denied: duplicate")
    assert tool == "MCP.docs.createIssue" and done["bridge_dispatch_started"] is False


def test_other_tools_of_the_server_run_unasked_unless_the_exec_names_the_server(client):
    quick = exec_cell(client, "return (await MCP.docs.add({a: 1, b: 2})).structuredContent")
    assert quick["status"] == "completed" and quick["value"] == {"sum": 3}, quick
    env = exec_cell(
        client, "return (await MCP.docs.add({a: 1, b: 2})).structuredContent", require_approval=["mcp:docs"]
    )
    [entry] = env["pending_tool_calls"]
    assert entry["tool"] == "MCP.docs.add" and "require_approval lists 'mcp:docs'" in entry["reason"]
    assert approve(client, env, True)["value"] == {"sum": 3}
