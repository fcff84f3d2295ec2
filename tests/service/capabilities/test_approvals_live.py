"""Approvals through a real server (`codemode serve`, real uvicorn, plugin loaded from the config file).

The payment tool appends every run to a log file, so the test sees from outside the server process
that a denied call never ran and an approved one ran exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.approval_plugin import LOG_VARIABLE
from tests.support.live_server import codemode_serve

pytestmark = pytest.mark.slow

CONFIG = """
[tools]
plugins = ["tests.support.approval_plugin"]
approve = ["pay"]
"""
PAY = 'try { return await pay({amount: 3, to: "ann"}); } catch (e) { return {code: e.code, message: e.message}; }'


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    workdir = tmp_path_factory.mktemp("approvals-live")
    log = workdir / "payments.log"
    with (
        codemode_serve(workdir, env={LOG_VARIABLE: str(log)}, config=CONFIG) as base,
        httpx.Client(base_url=base, timeout=30) as http,
    ):
        yield http, log


def payments(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = http.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_denied_call_never_runs_and_approved_call_runs_once(live):
    http, log = live
    denied = post(http, "/v1/exec", {"code": PAY})
    [entry] = denied["pending_tool_calls"]
    assert entry["method"] == "approval" and entry["tool"] == "pay" and payments(log) == []
    final = post(
        http,
        f"/v1/cells/{denied['cell_id']}/wait",
        {"approvals": [{"id": entry["id"], "approve": False, "reason": "budget frozen"}]},
    )
    assert final["value"]["code"] == "approval_denied" and "budget frozen" in final["value"]["message"]
    assert payments(log) == []

    approved = post(http, "/v1/exec", {"code": PAY})
    [entry] = approved["pending_tool_calls"]
    assert payments(log) == [] and approved["bridge_dispatch_started"] is False
    status = http.get(f"/v1/cells/{approved['cell_id']}").json()
    assert status["pending_tool_calls"] == [entry]
    final = post(http, f"/v1/cells/{approved['cell_id']}/wait", {"approvals": [{"id": entry["id"], "approve": True}]})
    assert final["status"] == "completed" and final["value"] == {"paid": 3, "to": "ann"}, final
    assert payments(log) == ['{"amount": 3, "to": "ann"}']
    assert final["telemetry"]["legs"] == 2
