"""MCP results checked against their outputSchema, seen from cells through HTTP.

The service talks to ``tests/mcp/servers/output_schemas.py`` over stdio: a tool whose outputSchema has
the pattern ``^(a+)+$`` answers a string of a's ending in "!".  The SDK would check it with Python's
backtracking ``re`` on the event loop (seconds for 25 a's, doubling with each one more); the service
checks it with RE2, in a helper process of the cell's principal once it is not tiny.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings_mcp import McpServerConfig
from tests.conftest import make_client
from tests.conftest import run_ok as ok

SERVER = str(Path(__file__).parents[2] / "mcp" / "servers" / "output_schemas.py")
CAUGHT = "try {{ return {{ok: await ({expr})}}; }} catch (e) {{ return {{message: e.message, code: e.code, tool: e.tool, errorType: e.errorType}}; }}"
MISMATCH = (
    "MCP server 'out' sent an unusable answer for tool 'evil': its structuredContent does not match the "
    'tool\'s outputSchema (value withheld): $.s: must match pattern "^(a+)+$"'
)


def _servers() -> tuple[McpServerConfig, ...]:
    return (McpServerConfig(name="out", command=sys.executable, args=(SERVER, "stdio"), timeout_ms=20000),)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with make_client(tmp_path_factory.mktemp("mcpresults"), mcp_servers=_servers()) as c:
        yield c


def caught(client: TestClient, expr: str) -> dict[str, Any]:
    return ok(client, CAUGHT.format(expr=expr))["value"]  # type: ignore[no-any-return]


def seats(client: TestClient) -> set[str]:
    """The principals the service's helper processes serve now."""
    return set(client.app.state.services.helpers.seats)  # type: ignore[attr-defined]


def test_the_reproduction_rejects_with_the_documented_error(client: TestClient) -> None:
    """The issue's call (25 a's and a "!"): the guest's await rejects with mcp_protocol naming the pattern."""
    got = caught(client, "MCP.out.evil({n: 25})")
    assert got == {"message": MISMATCH, "code": "mcp_protocol", "tool": "MCP.out.evil"}  # not transient


def test_a_long_evil_answer_is_checked_in_a_helper_of_the_cells_principal(client: TestClient) -> None:
    """20,000 a's and a "!" (Python's re would not finish this century): checked in a helper process that
    now serves the cell's principal; the call completes with RE2's verdict, a matching one resolves."""
    before = seats(client)
    assert caught(client, "MCP.out.evil({n: 20000})")["message"] == MISMATCH
    assert len(seats(client) - before) == 1  # a helper was seated for the cell's principal and checked it
    got = caught(client, "MCP.out.evil({n: 20000, tail: ''}).then(r => r.structuredContent.s.length)")
    assert got == {"ok": 20000}


def test_patterns_are_json_schemas_not_pythons(client: TestClient) -> None:
    """``^\\D+$`` fits Arabic-Indic digits in ECMA-262 and RE2 but not in Python's re: the result resolves,
    so the SDK's own check (which would refuse it) did not run."""
    assert caught(client, "MCP.out.non_digits({}).then(r => r.structuredContent.s)") == {"ok": "\u0661\u0662\u0663"}


def test_an_uncheckable_schema_rejects_before_the_call_is_sent(client: TestClient) -> None:
    """A lookahead RE2 cannot run: the call rejects naming the pattern, and the server never saw it."""
    got = caught(client, "MCP.out.lookahead({})")
    assert got["code"] == "mcp_protocol"
    assert got["message"].startswith("MCP server 'out' declares an outputSchema for tool 'lookahead' that cannot")
    counts = caught(client, "MCP.out.calls({}).then(r => r.structuredContent)")["ok"]
    assert "lookahead" not in counts


def test_when_no_helper_can_check_the_result_the_guest_hears_it_ran(tmp_path: Path) -> None:
    """A helper that answers out of shape is stopped; the call rejects with helper_failed, saying the tool
    ran (its effect is unknown) and that the trouble is transient, and a fresh helper checks the next one."""
    client = make_client(tmp_path, mcp_servers=_servers())
    client.app.state.services.helpers.test_payload = json.dumps({"answer": "unknown_outcome"})  # type: ignore[attr-defined]
    client.app.state.services.helpers.spares_wanted = 0  # type: ignore[attr-defined]
    with client:
        got = caught(client, "MCP.out.evil({n: 20000})")
        assert got["code"] == "helper_failed" and got["errorType"] == "transient", got
        assert got["message"].startswith(
            "MCP.out.evil ran, but its result could not be checked against the tool's outputSchema: the helper "
            "process that checks MCP tool results against their outputSchema answered with an outcome"
        ), got
        client.app.state.services.helpers.test_payload = None  # type: ignore[attr-defined]
        assert caught(client, "MCP.out.evil({n: 20000})")["message"] == MISMATCH
