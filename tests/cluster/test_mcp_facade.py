"""The MCP facade across replicas: ``wait``, ``cancel`` and approval rounds reach the replica holding the cell.

Three real replicas behind HAProxy (as tests/cluster/conftest.py, with the shipping plugin and approval of
`quote_shipping` configured), reached with the official SDK's MCP client over Streamable HTTP.  A cell lives
on the replica that started it; the facade of any other replica answers for it through the holder's own
routes, exactly as the HTTP API does.  An approval round's requestState is sealed under the secret the
replicas share in Redis and used once, whichever replica it comes back to.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from service.cluster.identity import cell_id_prefix, holder_of
from tests.cluster.conftest import REPLICA_TTL_SECONDS
from tests.mcp_server.conftest import http_client
from tests.mcp_server.task_client import Tasks
from tests.support.cluster import Cluster, running_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

#: Parks until a wait resumes it, then answers what the wait gave it.
PARKS = 'const r = await yield_control("hold"); return r.status;'
#: Parks on a call that needs a person's approval, twice.
QUOTES = """
const q = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});
const r = await quote_shipping({origin: "DE", destination: "IT", weight_kg: 3});
return [q.carrier, r.carrier];
"""
CONFIG = """
[tools]
plugins = ["service.demo.shipping"]
approve = ["quote_shipping"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster of tests/cluster/conftest.py, its replicas configured with CONFIG."""
    workdir = tmp_path_factory.mktemp("cluster")
    config = workdir / "codemode.toml"
    config.write_text(CONFIG, encoding="utf-8")
    env = {"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS), "CODEMODE_CONFIG": str(config)}
    with running_cluster(workdir, 3, env=env) as c:
        yield c


async def _approve(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


async def _tool(base: str, name: str, args: dict[str, Any]) -> Any:
    """One tool call through the MCP facade of the replica at ``base``."""
    async with http_client(base, None) as client:
        return await client.call_tool(name, args)


async def _parked(base: str) -> str:
    result = await _tool(base, "exec", {"code": PARKS})
    env = result.structured_content
    assert env is not None and env["status"] == "waiting", result
    return str(env["cell_id"])


async def test_wait_and_cancel_reach_the_holder_from_every_replica(cluster: Cluster) -> None:
    """For a cell started over MCP on each replica, `wait` through the next replica resumes it to its
    value and `cancel` through the third ends another one (failed, aborted)."""
    bases = [r.base for r in cluster.replicas]
    holders = set()
    for i, start in enumerate(bases):
        waiting, doomed = await _parked(start), await _parked(start)
        holders.add(holder_of(waiting))
        done = await _tool(bases[(i + 1) % 3], "wait", {"cell_id": waiting, "timeout_ms": 20000})
        assert done.structured_content is not None, done
        assert (done.structured_content["status"], done.structured_content["value"]) == ("completed", "yielded")
        assert done.is_error is False
        cancelled = await _tool(bases[(i + 2) % 3], "cancel", {"cell_id": doomed})
        assert cancelled.is_error is True and cancelled.structured_content is not None, cancelled
        assert cancelled.structured_content["code"] == "aborted"
    assert len(holders) == 3  # each replica held its own cells, so every wait and cancel crossed replicas


async def test_wait_through_the_front_finishes_cells_started_through_the_front(cluster: Cluster) -> None:
    """Behind round robin, one MCP session's `exec` and `wait` calls land on different replicas (HAProxy's
    X-Served-By says which) and every wait finishes its cell."""
    served: list[tuple[str, str]] = []  # (tool, replica) of each tools/call answer, in order

    async def record(response: httpx2.Response) -> None:
        sent = json.loads(response.request.content or b"{}")
        if sent.get("method") == "tools/call":
            served.append((sent["params"]["name"], response.headers["x-served-by"]))

    async with httpx2.AsyncClient(timeout=60, event_hooks={"response": [record]}) as http:
        async with Client(streamable_http_client(cluster.front + "/mcp", http_client=http)) as client:
            for _ in range(3):
                parked = (await client.call_tool("exec", {"code": PARKS})).structured_content
                assert parked is not None and parked["status"] == "waiting", parked
                done = await client.call_tool("wait", {"cell_id": parked["cell_id"], "timeout_ms": 20000})
                assert done.structured_content is not None and done.structured_content["value"] == "yielded", done
    pairs = list(zip(served[::2], served[1::2]))
    assert len(pairs) == 3 and all(e[0] == "exec" and w[0] == "wait" for e, w in pairs), served
    assert any(e[1] != w[1] for e, w in pairs), served  # some wait reached a replica that relayed it


async def test_a_finished_cell_and_a_stopped_replica_answer_with_the_holders_reason(cluster: Cluster) -> None:
    """After cancel, a wait through another replica gets the holder's refusal (cell_not_found); a cell of
    a replica that is not running is refused saying its replica stopped."""
    a, b, _ = (r.base for r in cluster.replicas)
    cell = await _parked(a)
    await _tool(b, "cancel", {"cell_id": cell})
    gone = await _tool(b, "wait", {"cell_id": cell})
    assert gone.is_error is True and "cell_not_found" in gone.content[0].text, gone
    nobody = cell_id_prefix("0123456789ab") + str(uuid.uuid4())
    stopped = await _tool(b, "wait", {"cell_id": nobody})
    assert stopped.is_error is True and "stopped" in stopped.content[0].text, stopped


async def test_a_person_approves_through_the_front_whichever_replica_each_round_reaches(cluster: Cluster) -> None:
    """Behind round robin, the rounds of one exec (exec, then a retry per approval) reach different replicas:
    each opens the state another one sealed (the secret is shared) and resumes the live cell on its holder;
    the cell completes with both quotes, each call run once."""
    served: list[str] = []

    async def record(response: httpx2.Response) -> None:
        sent = json.loads(response.request.content or b"{}")
        if sent.get("method") == "tools/call":
            served.append(response.headers["x-served-by"])

    async with httpx2.AsyncClient(timeout=60, event_hooks={"response": [record]}) as http:
        transport = streamable_http_client(cluster.front + "/mcp", http_client=http)
        async with Client(transport, elicitation_callback=_approve) as client:
            done = await client.call_tool("exec", {"code": QUOTES})
    envelope = done.structured_content
    assert envelope is not None and envelope["status"] == "completed", done
    assert len(envelope["value"]) == 2 and envelope["telemetry"]["call_count"] == 2
    assert len(served) == 3 and len(set(served)) > 1, served  # some retry reached another replica


async def test_a_request_state_is_used_once_across_replicas(cluster: Cluster) -> None:
    """A round started on one replica is answered through a second; sending the same state to the third is
    refused as used (the record of used states is shared), and so is a state altered on its way."""
    a, b, c = (r.base for r in cluster.replicas)
    async with http_client(a, None, elicitation_callback=_approve) as first:
        started = await first.session.call_tool("exec", {"code": QUOTES}, allow_input_required=True)
    assert isinstance(started, types.InputRequiredResult) and started.request_state, started
    [key] = started.input_requests
    answers = {key: types.ElicitResult(action="accept", content={"approve": True})}

    async def retry(base: str, state: str) -> Any:
        async with http_client(base, None, elicitation_callback=_approve) as client:
            return await client.session.call_tool(
                "exec", {"code": QUOTES}, input_responses=answers, request_state=state, allow_input_required=True
            )

    tampered = started.request_state[:-2] + ("AA" if started.request_state[-2:] != "AA" else "BB")
    altered = await retry(b, tampered)
    assert altered.is_error is True and "altered" in altered.content[0].text, altered
    second = await retry(b, started.request_state)
    assert isinstance(second, types.InputRequiredResult), second  # the second quote asks again
    replayed = await retry(c, started.request_state)
    assert replayed.is_error is True and "already used" in replayed.content[0].text, replayed
    async with http_client(c, None) as client:
        await client.call_tool("cancel", {"cell_id": holder_cell(second)})


def holder_cell(round_: types.InputRequiredResult) -> str:
    """The cell a round asks about, as its form names it."""
    message = next(iter(round_.input_requests.values())).params.message
    return message.split("(", 1)[1].split(")", 1)[0]


async def test_a_2025_session_through_the_front_stays_on_its_replica(cluster: Cluster) -> None:
    """A 2025-11-25 client's session lives in the replica that opened it: HAProxy sends every request that
    carries its Mcp-Session-Id back there, so the session's forms (elicitation requests on its streams) and
    its answers work behind round robin."""
    served: list[str] = []

    async def record(response: httpx2.Response) -> None:
        if response.request.headers.get("mcp-session-id"):
            served.append(response.headers["x-served-by"])

    async with httpx2.AsyncClient(timeout=60, event_hooks={"response": [record]}) as http:
        transport = streamable_http_client(cluster.front + "/mcp", http_client=http)
        async with Client(transport, elicitation_callback=_approve, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            for _ in range(3):
                done = await client.call_tool("exec", {"code": QUOTES})
                assert done.structured_content is not None and done.structured_content["status"] == "completed", done
    assert len(served) >= 6 and len(set(served)) == 1, served  # every request of the session on one replica


async def test_a_task_is_polled_through_the_front_on_whichever_replica_each_poll_reaches(cluster: Cluster) -> None:
    """A cell that outlives its exec's bound is a task; behind round robin its polls reach other replicas,
    which relay them by their Mcp-Name header (the task id, a cell id naming its holder) to the holder, and
    the task is polled to its result there, output and value whole."""
    polled: list[str] = []

    async def record(response: httpx2.Response) -> None:
        if response.request.headers.get("mcp-method") == "tasks/get":
            polled.append(response.headers["x-served-by"])

    tasks = Tasks()
    long_cell = 'text("before"); await new Promise((r) => setTimeout(r, 2500)); text("after"); return 7'
    async with httpx2.AsyncClient(timeout=60, event_hooks={"response": [record]}) as http:
        transport = streamable_http_client(cluster.front + "/mcp", http_client=http)
        async with Client(transport, extensions=[tasks]) as client:
            done = await client.call_tool("exec", {"code": long_cell, "timeout_ms": 300})
    envelope = done.structured_content
    assert envelope is not None and envelope["status"] == "completed" and envelope["value"] == 7, done
    assert [e["text"] for e in envelope["output"]] == ["before", "after"]
    assert tasks.created and envelope["cell_id"] == tasks.created[0].task_id
    assert "completed" in tasks.seen and len(set(polled)) > 1, polled  # polls reached several replicas
