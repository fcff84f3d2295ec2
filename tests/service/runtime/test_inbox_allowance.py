"""Inbox allowance end to end (SPEC §5, reference items 50-52): charged at settlement, reusable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.assembly import build_components
from service.settings import Settings
from service.tools import ToolSpec
from tests.conftest import make_client, parked_calls_settled, run
from tests.support.polling import poll_until
from tests.support.tools import TEST_TOOLS

MiB = 1024 * 1024
BUDGET_ERROR = "program-data budget exceeded"
RAN: dict[int, int] = {}  # page -> times the counted tool ran


async def _counted_page(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    """A real tool that records each run, so a refused reply still shows the tool executed."""
    page = int(params.get("page", 0))
    RAN[page] = RAN.get(page, 0) + 1
    await asyncio.sleep(float(params.get("delay", 0)))
    return {"page": page, "data": "p" * int(params["size"])}


COUNTED = ToolSpec(
    name="counted_page",
    description="Returns size bytes and counts its runs.",
    execute=_counted_page,
    input_schema={
        "type": "object",
        "required": ["size", "page"],
        "properties": {"size": {"type": "integer"}, "page": {"type": "integer"}, "delay": {"type": "number"}},
    },
)


async def _wide_text(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    """A reply of multi-byte text: ``chars`` characters, twice as many UTF-8 bytes."""
    return "é" * int(params["chars"])


WIDE = ToolSpec(
    name="wide_text",
    description="Returns chars characters of two-byte UTF-8 text.",
    execute=_wide_text,
    input_schema={"type": "object", "required": ["chars"], "properties": {"chars": {"type": "integer"}}},
)


def _client(tmp: Any, **overrides: Any) -> TestClient:
    settings = Settings(workers=1, data_dir=str(tmp), kill_grace_ms=500).replace(**overrides).check()
    return TestClient(create_app(settings, build_components(settings, extra_tools=[*TEST_TOOLS, COUNTED, WIDE])))


@pytest.fixture(scope="module")
def inbox_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Default limits (memory 64 MiB, snapshot 10 MiB: a 10 MiB inbox) plus the counted tool."""
    with _client(tmp_path_factory.mktemp("inbox"), workers=2) as c:
        yield c


def _wait(client: Any, cell_id: str) -> dict[str, Any]:
    """Resume with a generous leg: the exec leg was kept short only to park the cell."""
    r = client.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 15000})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.slow
def test_two_concurrent_6mib_replies_under_10mib_inbox(inbox_client):
    """Two 6 MiB replies pending at once: the first is delivered, the second is a catchable budget error."""
    code = """
    const settled = await Promise.allSettled([
      counted_page({size: 6 * 1048576, page: 101, delay: 0.4}),
      counted_page({size: 6 * 1048576, page: 102, delay: 0.4}),
    ]);
    return settled.map(s => s.status === "fulfilled"
      ? {ok: true, page: s.value.page, length: s.value.data.length}
      : {ok: false, name: s.reason.name, message: s.reason.message});
    """
    # The exec leg ends before the tools finish, so both replies settle while the cell is parked.
    env = run(inbox_client, code, timeout_ms=150)
    assert env["status"] == "waiting", env
    poll_until(lambda: parked_calls_settled(inbox_client, env["cell_id"]), "both replies settle while parked")
    env = _wait(inbox_client, env["cell_id"])
    assert env["status"] == "completed", env.get("error", env)
    delivered = [r for r in env["value"] if r["ok"]]
    refused = [r for r in env["value"] if not r["ok"]]
    assert len(delivered) == 1 and len(refused) == 1, env["value"]
    assert delivered[0]["length"] == 6 * MiB
    assert BUDGET_ERROR in refused[0]["message"]
    assert "Paginate" in refused[0]["message"]
    assert RAN.get(101) == 1 and RAN.get(102) == 1  # the refused tool still ran
    assert env["telemetry"]["call_count"] == 2


def test_single_reply_over_inbox_is_catchable(inbox_client):
    """A reply larger than min(memory_limit_bytes, max_snapshot_bytes) rejects catchably; the cell goes on."""
    code = """
    let caught = null;
    try { await blob({size: 3 * 1048576}); } catch (e) { caught = e.message; }
    const small = await blob({size: 10, page: 2});
    return {caught, small: small.data.length};
    """
    env = run(inbox_client, code, memory_limit_bytes=2 * MiB)  # inbox = 2 MiB
    assert env["status"] == "completed", env.get("error", env)
    assert BUDGET_ERROR in env["value"]["caught"]
    assert env["value"]["small"] == 10


def test_parked_cell_receives_big_reply_on_wait(inbox_client):
    """A big reply that arrives while the cell is parked is queued and delivered by the next wait."""
    code = "const r = await blob({size: 4 * 1048576, delay: 0.4}); return r.data.length;"
    env = run(inbox_client, code, timeout_ms=150)
    assert env["status"] == "waiting" and env["reason"] == "pending_tools", env
    poll_until(lambda: parked_calls_settled(inbox_client, env["cell_id"]), "the big reply settles while parked")
    env = _wait(inbox_client, env["cell_id"])
    assert env["status"] == "completed", env.get("error", env)
    assert env["value"] == 4 * MiB


@pytest.mark.slow
def test_36_sequential_512kib_pages_reuse_a_16mib_inbox(tmp_path):
    """36 sequential 512 KiB pages (18 MiB in all) succeed under a 16 MiB inbox: capacity is reused."""
    code = """
    let total = 0;
    for (let i = 0; i < 36; i++) {
      const r = await blob({size: 524288, page: i});
      if (r.page !== i) throw new Error("page out of order");
      total += r.data.length;
    }
    return total;
    """
    with make_client(tmp_path, max_snapshot_bytes=16 * MiB, workers=1) as client:
        env = run(client, code, timeout_ms=30000)
    assert env["status"] == "completed", env.get("error", env)
    assert env["value"] == 36 * 524288
    assert env["telemetry"]["call_count"] == 36


@pytest.mark.slow
def test_inbox_counts_utf8_bytes_not_characters(tmp_path):
    """A reply of 600k two-byte characters (1.2 MB of UTF-8) does not fit a 1 MiB inbox."""
    code = "try { return (await wide_text({chars: 600000})).length; } catch (e) { return e.message; }"
    with _client(tmp_path, max_snapshot_bytes=1 * MiB) as client:  # inbox = 1 MiB, heap stays 64 MiB
        env = run(client, code)
    assert env["status"] == "completed", env.get("error", env)
    assert isinstance(env["value"], str) and BUDGET_ERROR in env["value"], env["value"]
