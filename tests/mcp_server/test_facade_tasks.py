"""Cells as MCP tasks, through a task-capable client on the official SDK (tests/mcp_server/task_client.py)
over Streamable HTTP and over stdio.

A client that declares the tasks extension gets a long cell (one that outlives its exec's timeout_ms) as a
task: `tasks/get` polls it (working, input_required with an approval form, completed with the tool result),
`tasks/update` carries a person's answers, `tasks/cancel` stops it.  Key `gamma` needs approval for
`quote_shipping`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp_server.conftest import ALPHA, GAMMA, connected, http_client
from tests.mcp_server.task_client import TASKS, Tasks, cancel_task, get_task

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

#: Still running at its 300 ms bound: it waits 1.5 s for the MCP server, writing before and after.
LONG = """
text("started");
const r = await MCP.docs.sleep_echo({seconds: 1.5, value: "late"});
text("woke");
return r.structuredContent ?? r.content;
"""
#: Outlives its bound, then asks for an approval (so the task, not the exec, asks the person).
LONG_THEN_APPROVAL = """
await MCP.docs.sleep_echo({seconds: 1, value: "x"});
const q = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});
return q.carrier;
"""


class Person:
    def __init__(self) -> None:
        self.shown: list[str] = []
        self.approve = True

    async def __call__(self, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        self.shown.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": self.approve, "reason": "checked"})


PERSON = Person()
TASKS_OF: dict[str, Tasks] = {}


@pytest.fixture(scope="module", params=["http", "stdio"])
async def tasker(
    request: pytest.FixtureRequest, config_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Client]:
    """A client of gamma that takes tasks (its person approves through the task's forms), on one transport.

    Its first search lists the MCP server's tools: until they are known, a call of any of them needs approval
    (an entry may name it), which would ask before the task this module means to see."""
    tasks = TASKS_OF[request.param] = Tasks(PERSON)
    async with connected(request, config_file, tmp_path_factory, GAMMA, extensions=[tasks]) as client:
        await client.call_tool("search_tools", {"query": "sleep echo"})
        yield client


def tasks_of(client: Client) -> Tasks:
    return next(t for t in TASKS_OF.values() if t in (client.extensions or []))


async def test_a_cell_that_outlives_its_bound_is_a_task_polled_to_its_result(tasker: Client) -> None:
    """The exec answers a task (id = the cell id) while the cell waits on the MCP server; polls say working,
    then completed with the tool result exec would have given, its output whole (before and after)."""
    tasks = tasks_of(tasker)
    tasks.seen.clear()
    done = await tasker.call_tool("exec", {"code": LONG, "timeout_ms": 300})
    assert tasks.created, done
    created = tasks.created[-1]
    assert created.status == "working" and created.task_id.startswith("cell_") and created.poll_interval_ms == 500
    assert tasks.seen[0] == "working" and tasks.seen[-1] == "completed", tasks.seen
    envelope = done.structured_content
    assert done.is_error is False and envelope is not None and envelope["status"] == "completed", done
    assert envelope["cell_id"] == created.task_id and "late" in str(envelope["value"])
    started, woke = (str(entry.get("text")) for entry in envelope["output"])  # wrapped: MCP data is untrusted
    assert "\nstarted\n" in started and "\nwoke\n" in woke
    assert "started" in done.content[0].text and "woke" in done.content[0].text
    again = await get_task(tasker.session, created.task_id)  # a finished task keeps answering its result
    assert again.status == "completed" and again.result is not None
    assert again.result["structuredContent"] == envelope and again.result["isError"] is False


async def test_a_short_cell_answers_at_once_without_a_task(tasker: Client) -> None:
    tasks = tasks_of(tasker)
    before = len(tasks.created)
    done = await tasker.call_tool("exec", {"code": "return 41 + 1"})
    assert done.structured_content is not None and done.structured_content["value"] == 42
    assert len(tasks.created) == before


async def test_a_task_asks_a_person_through_its_forms_and_goes_on(tasker: Client) -> None:
    """The approval comes after the task started: tasks/get answers input_required with the approval form,
    the person's answer goes back with tasks/update, and the live cell goes on to complete."""
    tasks = tasks_of(tasker)
    tasks.seen.clear()
    PERSON.shown.clear()
    PERSON.approve = True
    done = await tasker.call_tool("exec", {"code": LONG_THEN_APPROVAL, "timeout_ms": 300})
    assert "input_required" in tasks.seen and tasks.seen[-1] == "completed", tasks.seen
    assert len(PERSON.shown) == 1 and '\nTool: "quote_shipping"\n' in PERSON.shown[0]
    assert done.structured_content is not None and done.structured_content["status"] == "completed", done
    assert isinstance(done.structured_content["value"], str)
    assert done.structured_content["telemetry"]["call_count"] == 2


async def test_a_cancelled_task_stops_its_cell(tasker: Client) -> None:
    """tasks/cancel stops the cell: the task answers cancelled, and the cell's id is gone."""
    created = await tasker.session.call_tool("exec", {"code": LONG, "timeout_ms": 300}, allow_claimed=True)
    assert getattr(created, "result_type", None) == "task", created
    task_id = created.task_id  # type: ignore[union-attr]
    await cancel_task(tasker.session, task_id)
    task = await get_task(tasker.session, task_id)
    assert task.status == "cancelled" and "aborted" in (task.status_message or ""), task
    gone = await tasker.call_tool("wait", {"cell_id": task_id})
    assert gone.is_error is True and "cell_not_found" in gone.content[0].text


async def test_a_task_is_its_tenants_alone_and_needs_the_extension(base_url: str) -> None:
    """Another tenant's poll is told the task is unknown; a poll that does not declare the extension is
    -32021 naming it; an Mcp-Name header that is not the task's id is refused."""
    tasks = Tasks()
    async with http_client(base_url, GAMMA, extensions=[tasks]) as gamma:
        await gamma.call_tool("search_tools", {"query": "sleep echo"})
        created = await gamma.session.call_tool("exec", {"code": LONG, "timeout_ms": 300}, allow_claimed=True)
        task_id = created.task_id  # type: ignore[union-attr]
        async with http_client(base_url, ALPHA, extensions=[Tasks()]) as alpha:
            with pytest.raises(MCPError, match="is not known here"):
                await get_task(alpha.session, task_id)
        async with http_client(base_url, GAMMA) as plain:
            with pytest.raises(MCPError) as missing:
                await get_task(plain.session, task_id)
            assert missing.value.error.code == -32021 and TASKS in str(missing.value.error.data)
        body = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tasks/get",
            "params": {
                "taskId": task_id,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
                },
            },
        }
        headers = {
            "Authorization": f"Bearer {GAMMA}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tasks/get",
        }
        wrong = httpx.post(base_url + "/mcp", json=body, headers={**headers, "Mcp-Name": "cell_other"}, timeout=30)
        assert "Mcp-Name" in wrong.text or "mcp-name" in wrong.text, wrong.text
        right = httpx.post(base_url + "/mcp", json=body, headers={**headers, "Mcp-Name": task_id}, timeout=30)
        assert right.json()["result"]["taskId"] == task_id, right.text
        await cancel_task(gamma.session, task_id)


async def test_a_client_without_the_extension_never_gets_a_task(base_url: str) -> None:
    """The same long cell for a client that does not take tasks: the exec answers the cell waiting."""
    async with http_client(base_url, GAMMA) as client:
        await client.call_tool("search_tools", {"query": "sleep echo"})
        parked = await client.call_tool("exec", {"code": LONG, "timeout_ms": 300})
    envelope: Any = parked.structured_content
    assert envelope is not None and envelope["status"] == "waiting", parked
