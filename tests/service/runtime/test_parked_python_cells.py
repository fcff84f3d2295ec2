"""Parked Python cells outlive their service process (service/runtime/parked_cells.py), on one machine:
a real service on a real SQLite file is stopped while a Python cell waits for an approval, a new service
on the same file takes the cell up on the caller's wait, and it finishes as the first one would have.
A record altered in the file, or copied under another cell's name, is refused with its own code."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from service.settings import ToolSettings
from tests.conftest import make_client
from tests.support.tools import CALLS

#: Parks on the approval of `echo`, with state of its own on both sides of the pause.
CODE = "text('before')\nstate = [1, 2, 3]\nr = await echo(x=41)\ntext('after')\n[r['echo'], state]"


def service(tmp: Path) -> TestClient:
    return make_client(tmp, tools=ToolSettings())


def parked(client: TestClient, code: str = CODE, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/exec", json={"code": code, "language": "python", "require_approval": ["echo"], **fields})
    env = r.json()
    assert env["status"] == "waiting", env
    return env  # type: ignore[no-any-return]


def approve(client: TestClient, env: dict[str, Any], approve: bool = True) -> Any:
    [entry] = env["pending_tool_calls"]
    body = {"approvals": [{"id": entry["id"], "approve": approve}]}
    return client.post(f"/v1/cells/{env['cell_id']}/wait", json=body)


def records(tmp: Path) -> dict[str, bytes]:
    with sqlite3.connect(tmp / "store.sqlite3") as db:
        return {cell: bytes(record) for cell, record in db.execute("SELECT cell_id, record FROM parked_cells")}


def put_record(tmp: Path, cell_id: str, record: bytes) -> None:
    with sqlite3.connect(tmp / "store.sqlite3") as db:
        db.execute("UPDATE parked_cells SET record = ? WHERE cell_id = ?", (record, cell_id))


def test_a_restarted_service_takes_up_a_parked_python_cell(tmp_path):
    """Stopped while the cell waits for approval, started again on the same file: the approval resumes the
    same paused program (its state kept, the tool run once, its earlier output not repeated), and its
    record is used once."""
    with service(tmp_path) as first:
        env = parked(first)
    assert list(records(tmp_path)) == [env["cell_id"]]
    before = CALLS.get("echo", 0)
    with service(tmp_path) as second:
        done = approve(second, env).json()
        assert done["status"] == "completed", done
        assert done["value"] == [41, [1, 2, 3]] and done["output"] == [{"type": "text", "text": "after"}]
        assert CALLS.get("echo", 0) == before + 1 and done["telemetry"]["legs"] == 2
        assert records(tmp_path) == {}
        again = approve(second, env)
        assert again.status_code == 404 and again.json()["error"]["code"] == "cell_not_found", again.text


def test_a_denial_and_a_cell_that_parks_again_after_a_restart(tmp_path):
    """A denial reaches the guest as the first service would have given it; a cell taken up parks again
    (and is written out again), so it survives a second restart too."""
    code = "out = []\nfor i in range(2):\n    try:\n        out.append((await echo(x=i))['echo'])\n    except Exception as e:\n        out.append(str(e))\nout"
    with service(tmp_path) as first:
        env = parked(first, code)
    with service(tmp_path) as second:
        env2 = approve(second, env, approve=False).json()
        assert env2["status"] == "waiting", env2
        assert list(records(tmp_path)) == [env["cell_id"]]
    with service(tmp_path) as third:
        done = approve(third, env2).json()
    assert done["status"] == "completed", done
    assert "(code: approval_denied)" in done["value"][0] and done["value"][1] == 1, done


def test_a_tampered_record_is_refused(tmp_path):
    """One byte of the dump changed in the file: the wait answers 409 snapshot_tampered and nothing runs."""
    with service(tmp_path) as first:
        env = parked(first)
    record = bytearray(records(tmp_path)[env["cell_id"]])
    record[-40] ^= 1  # inside the engine's dump
    put_record(tmp_path, env["cell_id"], bytes(record))
    before = CALLS.get("echo", 0)
    with service(tmp_path) as second:
        r = approve(second, env)
    assert r.status_code == 409 and r.json()["error"]["code"] == "snapshot_tampered", r.text
    assert CALLS.get("echo", 0) == before


def test_another_cells_record_is_refused_as_foreign(tmp_path):
    """A genuine record of tenant A's cell copied under cell B's name: B's wait answers snapshot_foreign."""
    with service(tmp_path) as first:
        a, b = parked(first), parked(first)
    put_record(tmp_path, b["cell_id"], records(tmp_path)[a["cell_id"]])
    with service(tmp_path) as second:
        r = approve(second, b)
        assert r.status_code == 409 and r.json()["error"]["code"] == "snapshot_foreign", r.text
        assert approve(second, a).json()["status"] == "completed"  # its own record is untouched


def test_javascript_and_busy_cells_are_not_written_out(tmp_path):
    """What does not move: a JavaScript cell (its heap cannot be dumped), a Python cell with host work under
    way when it parks (a running timer), a Python cell with buffered session-store writes."""
    with service(tmp_path) as first:
        r = first.post("/v1/exec", json={"code": "return await echo({x: 1})", "require_approval": ["echo"]})
        assert r.json()["status"] == "waiting"
        parked(first, "import asyncio\nawait asyncio.gather(echo(x=1), sleep(30))")
        parked(first, "await store('k', 1)\nawait echo(x=1)", session_id="s1")
        assert records(tmp_path) == {}
