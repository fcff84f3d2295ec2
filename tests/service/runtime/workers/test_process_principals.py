"""A process reached by two principals (a reported attack: an owned worker acting as another key), through the real service.

Every worker process here runs the test-only attacker payload (``tests/support/compromised_worker.py``,
``hijack``) under the real kernel sandbox: it answers each cell with its pid and how many cells it
served, until a cell carrying the exploit arrives; from then on it is owned, and in every cell it
receives it calls ``send_email`` under that cell's runtime id, reporting a heap of 0, as the reproduction
did.  Two keys of one tenant: ``narrow`` (its policy denies ``send_email``) runs the exploit; ``admin``
(allowed to send) runs ordinary cells afterwards.  Under the default ``worker_isolation = "key"`` the owned
process never receives an admin cell and ``send_email`` never runs; under ``tenant`` the documented wider
sharing happens and it runs in the admin's name.  Then ``cell`` and ``session`` isolation, as pids.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.runtime.workers import supply
from service.runtime.workers.process import start_worker
from service.settings import ApiKey
from service.tools import ToolSpec
from tests.conftest import make_client
from tests.support.polling import poll_until
from tests.support.tools import TEST_TOOLS

EXPLOIT = "/* exploit */ return 0"
NARROW = {"Authorization": "Bearer key-narrow"}
ADMIN = {"Authorization": "Bearer key-admin"}
KEYS = (ApiKey("key-narrow", "acme", {"deny": ["send_email"]}), ApiKey("key-admin", "acme"))
SENT: list[str] = []


async def _send_email(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    SENT.append(str(params.get("to")))
    return {"sent": True}


SEND_EMAIL = ToolSpec(
    name="send_email", description="Sends an email (records it).", execute=_send_email, input_schema={"type": "object"}
)


@pytest.fixture
def hijacked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker the pool starts runs the attacker's payload."""
    plan = {"hijack": {"tool": "send_email", "trigger": "/* exploit */"}}
    monkeypatch.setattr(supply, "start_worker", functools.partial(start_worker, test_payload=json.dumps(plan)))
    SENT.clear()


@pytest.fixture
def service(request: pytest.FixtureRequest, tmp_path: Any, hijacked: None) -> Iterator[TestClient]:
    """The real service with the two keys, ``worker_isolation`` from the test's ``isolation`` parameter."""
    with make_client(
        tmp_path, api_keys=KEYS, extra_tools=[*TEST_TOOLS, SEND_EMAIL], workers=2, worker_isolation=request.param
    ) as client:
        yield client


def served(client: TestClient, headers: dict[str, str], code: str = "return 1", **fields: Any) -> dict[str, Any]:
    """The payload's answer to one cell: the pid that served it, how many it served, whether it was owned."""
    r = client.post("/v1/exec", json={"code": code, **fields}, headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    return r.json()["value"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("service", "shared"), [("key", False), ("tenant", True)], indirect=["service"])
def test_a_worker_owned_through_one_keys_cell_never_receives_another_keys_cells(service, shared):
    """The narrow key's exploit owns its process, which then forges ``send_email`` in every cell it gets.
    Under ``key`` (the default) the admin key's cells run in another process and nothing is sent; under
    ``tenant`` they pack into the owned process and the email goes out in the admin's name."""
    exploit = served(service, NARROW, EXPLOIT)
    assert exploit["owned"] and "refused" in exploit["tool"], exploit  # the narrow key's policy holds for its own cell
    admin = [served(service, ADMIN) for _ in range(3)]
    narrow_again = served(service, NARROW)
    if shared:
        assert {a["pid"] for a in admin} == {exploit["pid"]}
        assert all(a["owned"] and a["tool"] == {"sent": True} for a in admin), admin
        assert SENT == ["attacker@example.com"] * 3
    else:
        assert exploit["pid"] not in {a["pid"] for a in admin}
        assert not any(a["owned"] for a in admin), admin
        assert SENT == []
        # The owned process keeps serving the key that owned it (its principal), and nobody else.
        assert narrow_again["pid"] == exploit["pid"] and narrow_again["owned"]
        pool = service.app.state.services.pool
        [owned] = [w for w in pool.workers() if w.pid == exploit["pid"]]
        assert owned.tenant == "acme" and owned.principal != next(
            w.principal for w in pool.workers() if w.pid == admin[0]["pid"]
        )


@pytest.mark.parametrize("service", ["cell"], indirect=True)
def test_cell_isolation_never_reuses_a_process(service):
    """Each cell, of one key and one session, runs in a process that served no cell before it, and that
    process is stopped once the cell ended; a background cell too."""
    answers = [served(service, ADMIN, session_id="s1") for _ in range(4)]
    r = service.post("/v1/exec", json={"code": "return 1", "background": True, "session_id": "s1"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    done = service.post(f"/v1/cells/{r.json()['cell_id']}/wait", json={"timeout_ms": 10000}, headers=ADMIN).json()
    answers.append(done["value"])
    assert [a["served"] for a in answers] == [1] * 5
    pids = [a["pid"] for a in answers]
    assert len(set(pids)) == 5, pids
    poll_until(lambda: not any(_alive(pid) for pid in pids), "every cell's process is stopped after its cell")


@pytest.mark.parametrize("service", ["session"], indirect=True)
def test_session_isolation_shares_a_process_only_within_a_session(service):
    """Cells of one key in session s1 share a process, s2's get another; a cell without a session gets one of
    its own, like a cell under ``cell`` isolation."""
    s1 = [served(service, ADMIN, session_id="s1") for _ in range(2)]
    s2 = [served(service, ADMIN, session_id="s2") for _ in range(2)]
    alone = [served(service, ADMIN) for _ in range(2)]
    assert s1[0]["pid"] == s1[1]["pid"] and s2[0]["pid"] == s2[1]["pid"]
    assert len({s1[0]["pid"], s2[0]["pid"], alone[0]["pid"], alone[1]["pid"]}) == 4
    assert [a["served"] for a in alone] == [1, 1]
    metrics = service.get("/metrics").text.splitlines()
    assert "codemode_worker_principals 2.0" in metrics  # s1's and s2's processes; the two alone ones ended
    poll_until(lambda: "codemode_workers_single_use 0.0" in service.get("/metrics").text, "no process of one cell")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
