"""The official TypeScript SDK's MCP client (tests/node, `@modelcontextprotocol/sdk`) against `/mcp` of a
live `codemode serve`: a client written by others connects, lists, reads, runs and resumes a cell."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.mcp_server.conftest import ALPHA

pytestmark = pytest.mark.slow

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCRIPT = NODE_DIR / "mcp_client.mjs"
SDK = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


def _run_client(base_url: str, key: str) -> dict:
    node = shutil.which("node")
    if node is None or not SDK.exists():
        pytest.fail(
            f"node and the MCP SDK in {NODE_DIR} are needed: run `npm ci --prefix tests/node` (scripts/test does)"
        )
    done = subprocess.run(
        [node, str(SCRIPT), base_url + "/mcp", key], capture_output=True, text=True, timeout=120, cwd=NODE_DIR
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_typescript_sdk_client_lists_runs_and_resumes(base_url: str) -> None:
    """The TS SDK client connects, finds the four tools with output schemas, the declaration resources and
    both templates (templates/list is no longer 'Method not found'), and its exec/wait results pass its
    own outputSchema validation: a parked cell, resumed by wait, completes with its value."""
    seen = _run_client(base_url, ALPHA)
    assert seen["server"]["name"] == "codemode" and "resources" in seen["capabilities"]
    assert {t["name"]: t["hasOutputSchema"] for t in seen["tools"]} == {
        "exec": True,
        "wait": True,
        "cancel": True,
        "search_tools": True,
    }
    assert {"codemode://api/results.d.ts", "codemode://api/mcp/docs.d.ts"} <= set(seen["resources"])
    assert set(seen["templates"]) == {"codemode://api/tools/{name}.d.ts", "codemode://api/mcp/{server}.d.ts"}
    assert seen["resultsDts"] > 0
    assert seen["exec"]["isError"] is False and seen["exec"]["envelope"]["status"] == "waiting"
    assert "parking" in seen["exec"]["text"]
    envelope = seen["wait"]["envelope"]
    assert (envelope["status"], envelope["value"]) == ("completed", {"resumed": "yielded"}), envelope
    assert seen["failed"] == {"isError": True, "code": "uncaught_error"}
