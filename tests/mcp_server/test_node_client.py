"""The official TypeScript SDK's MCP client (tests/node, `@modelcontextprotocol/sdk`) against `/mcp` of a
live `codemode serve`: a client written by others connects, lists, reads, runs and resumes a cell."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_server.conftest import ALPHA, GAMMA
from tests.support.live_server import ROOT

pytestmark = pytest.mark.slow

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCRIPT = NODE_DIR / "mcp_client.mjs"
#: The MCP Inspector's CLI (``@modelcontextprotocol/inspector-cli``, on the TS SDK 1.x: the 2025-11-25 path).
#: Run from its own build directory: it finds its package.json relative to the working directory.
INSPECTOR = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "inspector-cli" / "build"
PERSON_SCRIPT = NODE_DIR / "mcp_approval_client.mjs"
SDK = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


def _run_client(base_url: str, key: str, script: Path = SCRIPT) -> dict:
    node = shutil.which("node")
    if node is None or not SDK.exists():
        pytest.fail(
            f"node and the MCP SDK in {NODE_DIR} are needed: run `npm ci --prefix tests/node` (scripts/test does)"
        )
    done = subprocess.run(
        [node, str(script), base_url + "/mcp", key], capture_output=True, text=True, timeout=120, cwd=NODE_DIR
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
    assert seen["failed"] == {"isError": True, "code": "internal_error"}


def test_the_typescript_sdk_client_shows_a_person_the_approval_forms(base_url: str) -> None:
    """The TS SDK client, on 2025-11-25 in a session at /mcp, declares form elicitation: each call of the
    cell that needs approval reaches it as an elicitation/create request naming the tool and input; the first
    approved runs, the second denied rejects in the cell with the person's reason, in one exec call."""
    seen = _run_client(base_url, GAMMA, PERSON_SCRIPT)
    assert seen["protocol"] == "2025-11-25" and seen["session"] is True
    first, second = seen["shown"]
    assert '"destination":"FR"' in first["message"] and '"destination":"IT"' in second["message"]
    assert set(first["schema"]["properties"]) == {"approve", "reason"}
    envelope = seen["envelope"]
    assert envelope["status"] == "completed", envelope
    carrier, code, message = envelope["value"]
    assert carrier and code == "approval_denied" and "not to Italy today" in message
    assert envelope["telemetry"]["call_count"] == 2


def _inspect(target: list[str], *args: str) -> Any:
    """One MCP Inspector CLI call (``--cli``) against ``target``; its JSON answer."""
    node = shutil.which("node")
    if node is None or not (INSPECTOR / "cli.js").exists():
        pytest.fail(f"node and the MCP Inspector CLI in {NODE_DIR} are needed: run `npm ci --prefix tests/node`")
    done = subprocess.run(
        [node, "cli.js", "--cli", *target, *args], capture_output=True, text=True, timeout=120, cwd=INSPECTOR
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_mcp_inspector_cli_lists_and_runs_cells_over_http_and_stdio(
    base_url: str, config_file: Path, tmp_path: Path
) -> None:
    """The Inspector CLI (2025-11-25, a session at /mcp; and `codemode mcp` over stdio, its config given as
    CODEMODE_CONFIG as the guide says) lists the four tools and the templates and runs a cell; it shows no
    forms, so a call that needs approval is answered waiting, saying a person decides over the HTTP API."""
    http = [base_url + "/mcp", "--header", f"Authorization: Bearer {GAMMA}"]
    env = {"CODEMODE_CONFIG": str(config_file), "CODEMODE_API_KEY": GAMMA, "CODEMODE_DATA_DIR": str(tmp_path)}
    stdio = [f"-e={k}={v}" for k, v in {**env, "PYTHONPATH": str(ROOT)}.items()] + [
        sys.executable,
        "-m",
        "service.cli",
        "mcp",
    ]
    for target in (http, stdio):
        tools = _inspect(target, "--method", "tools/list")["tools"]
        assert [t["name"] for t in tools] == ["exec", "wait", "cancel", "search_tools"]
        ran = _inspect(target, "--method", "tools/call", "--tool-name", "exec", "--tool-arg", "code=return 6 * 7")
        assert ran["structuredContent"]["value"] == 42 and ran["isError"] is False, ran
    templates = _inspect(http, "--method", "resources/templates/list")["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {
        "codemode://api/tools/{name}.d.ts",
        "codemode://api/mcp/{server}.d.ts",
    }
    quote = 'code=return await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2})'
    parked = _inspect(http, "--method", "tools/call", "--tool-name", "exec", "--tool-arg", quote)
    assert parked["structuredContent"]["status"] == "waiting", parked
    assert "A person must decide these approvals" in parked["content"][0]["text"]
    cell = parked["structuredContent"]["cell_id"]
    _inspect(http, "--method", "tools/call", "--tool-name", "cancel", "--tool-arg", f"cell_id={cell}")
