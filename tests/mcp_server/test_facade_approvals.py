"""Approvals over the MCP facade, through the SDK's client over Streamable HTTP (`/mcp` of `codemode serve`)
and over stdio (`codemode mcp`), in JavaScript and in Python cells.

Key `gamma` needs approval for `quote_shipping` and `MCP.docs.add`.  A cell parked on such a call holds its
pending input encoded (the registry never parses it on the loop); the facade must still answer it as plain
JSON (it used to fail with "Unable to serialize unknown type: orjson.Fragment").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.mcp_server.conftest import ALPHA, GAMMA, http_client, stdio_session

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

QUOTE = {"origin": "DE", "destination": "FR", "weight_kg": 2}

#: Per language: a cell that asks for an approved quote and a sum, and one that catches a denial.
CELLS = {
    "javascript": (
        'text("asking"); const q = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});\n'
        "const s = await MCP.docs.add({a: 2, b: 3});\n"
        "return {carrier: q.carrier, sum: s.structuredContent.sum};",
        'try { await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2}); return "ran"; }\n'
        "catch (e) { return e.message + ` (code: ${e.code})`; }",
    ),
    "python": (
        'text("asking")\nq = await quote_shipping(origin="DE", destination="FR", weight_kg=2)\n'
        "s = await MCP.docs.add(a=2, b=3)\n"
        '{"carrier": q["carrier"], "sum": s["structuredContent"]["sum"]}',
        "try:\n"
        '    await quote_shipping(origin="DE", destination="FR", weight_kg=2)\n'
        '    r = "ran"\n'
        "except Exception as e:\n"
        "    r = str(e)\n"
        "r",
    ),
}


@pytest.fixture(scope="module", params=["http", "stdio"])
async def gamma(
    request: pytest.FixtureRequest, config_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Client]:
    """A connected client of tenant gamma (calls that need approval) on one transport."""
    if request.param == "http":
        async with http_client(request.getfixturevalue("base_url"), GAMMA) as client:
            yield client
    else:
        async with stdio_session(config_file, tmp_path_factory.mktemp("stdio"), GAMMA) as client:
            yield client


def _approval(envelope: dict[str, Any] | None) -> dict[str, Any]:
    assert envelope is not None and envelope["status"] == "waiting", envelope
    [call] = envelope["pending_tool_calls"]
    assert call["method"] == "approval", call
    return call  # type: ignore[no-any-return]


@pytest.mark.parametrize("language", ["javascript", "python"])
async def test_a_parked_approval_is_answered_as_plain_json_and_resumes_without_replay(
    gamma: Client, language: str
) -> None:
    """exec parks on `quote_shipping`: the answer shows the pending call with its input as JSON (text and
    envelope); approving it runs the call, the cell goes on to the next approval (`MCP.docs.add`), and
    approving that completes the cell with both results; the output before the first park is not repeated."""
    asking, _ = CELLS[language]
    parked = await gamma.call_tool("exec", {"code": asking, "language": language})
    assert parked.is_error is False, parked
    first = _approval(parked.structured_content)
    assert first["tool"] == "quote_shipping" and first["input"] == QUOTE
    text = parked.content[0].text
    assert "approval req_" in text and '"origin":"DE"' in text and "asking" in text
    cell_id = parked.structured_content["cell_id"]  # type: ignore[index]

    second = await gamma.call_tool("wait", {"cell_id": cell_id, "approvals": [{"id": first["id"], "approve": True}]})
    add = _approval(second.structured_content)
    assert add["tool"] == "MCP.docs.add" and add["input"] == {"a": 2, "b": 3}

    done = await gamma.call_tool("wait", {"cell_id": cell_id, "approvals": [{"id": add["id"], "approve": True}]})
    envelope = done.structured_content
    assert done.is_error is False and envelope is not None and envelope["status"] == "completed", envelope
    assert envelope["value"]["sum"] == 5 and isinstance(envelope["value"]["carrier"], str)
    assert envelope["telemetry"]["call_count"] == 2  # each approved call ran once: nothing was replayed
    assert "asking" not in done.content[0].text


@pytest.mark.parametrize("language", ["javascript", "python"])
async def test_a_denied_call_rejects_in_the_cell_with_the_reason(gamma: Client, language: str) -> None:
    """Denying the pending call through the facade rejects the guest's await with approval_denied and
    the person's reason; the call never ran."""
    _, denied = CELLS[language]
    parked = await gamma.call_tool("exec", {"code": denied, "language": language})
    call = _approval(parked.structured_content)
    cell_id = parked.structured_content["cell_id"]  # type: ignore[index]
    decision = {"id": call["id"], "approve": False, "reason": "not today"}
    done = await gamma.call_tool("wait", {"cell_id": cell_id, "approvals": [decision]})
    envelope = done.structured_content
    assert envelope is not None and envelope["status"] == "completed", envelope
    # Python's exceptions carry no attributes: in both languages the message names the reason and the code.
    assert "not today" in envelope["value"] and envelope["value"].endswith("(code: approval_denied)")
    assert envelope["bridge_dispatch_started"] is False  # the denied call never reached the tool


async def test_a_background_cells_output_and_value_reach_an_mcp_wait(base_url: str) -> None:
    """A background cell started over HTTP keeps its output and value encoded until collected; `wait` over
    MCP answers them as plain JSON (output entries, the value), as the HTTP wait would."""
    started = httpx.post(
        base_url + "/v1/exec",
        json={"code": 'json({n: 1}); text("two"); return {items: [1, 2, 3]}', "background": True},
        headers={"Authorization": f"Bearer {ALPHA}"},
        timeout=60,
    )
    assert started.status_code == 200 and started.json()["status"] == "running", started.text
    async with http_client(base_url, ALPHA) as alpha:
        done = await alpha.call_tool("wait", {"cell_id": started.json()["cell_id"], "timeout_ms": 20000})
    envelope = done.structured_content
    assert envelope is not None and envelope["status"] == "completed", envelope
    assert envelope["value"] == {"items": [1, 2, 3]}
    assert [entry.get("value", entry.get("text")) for entry in envelope["output"]] == [{"n": 1}, "two"]
    assert 'Result: {"items":[1,2,3]}' in done.content[0].text
