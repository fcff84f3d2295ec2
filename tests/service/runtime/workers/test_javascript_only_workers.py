"""A JavaScript-only service (``python_cells = false``) starts no Monty machinery and refuses Python cells.

A worker loads Monty before it confines itself (afterwards it can open no file), so whether it can run
Python cells is fixed when it starts: the pool keeps two kinds of process (``supply.py``), and a
JavaScript cell never runs in one made for Python cells.  What a
worker loaded is read from its memory map (``/proc/<pid>/maps``), for a worker started as the pool starts
them, with Python and without.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bridge.messages import WorkerOptions
from service.runtime.workers.process import start_worker
from service.settings import Settings
from tests.conftest import make_client, run

#: Monty's extension module, as it appears in a process's memory map once imported.
MONTY = "pydantic_monty/_monty"


def _loads_monty(python: bool) -> tuple[bool, int]:
    """Whether a worker started with ``python`` has Monty's extension mapped, and how many child processes
    (Monty children) it started."""

    async def scenario() -> tuple[bool, int]:
        # Confinement off: a confined worker is not dumpable, and its map is root's to read.
        options: WorkerOptions = {"frame_cap": 1 << 20, "sandbox": {"mode": "off"}, "python": python}
        worker = await start_worker(options, options["frame_cap"])
        try:
            return MONTY in Path(f"/proc/{worker.pid}/maps").read_text(), len(_children(worker.pid))
        finally:
            worker.kill()
            await worker.proc.wait()

    return asyncio.run(scenario())


def _children(pid: int) -> list[str]:
    return [c for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def test_a_worker_without_python_never_loads_monty():
    """A worker started for JavaScript only has no Monty mapped and starts no Monty child; one started for
    both has both (the control)."""
    assert _loads_monty(python=True) == (True, 1)
    assert _loads_monty(python=False) == (False, 0)


def test_python_cells_are_on_by_default():
    """Python cells run unless the operator turns them off."""
    assert Settings().python_cells is True


def test_a_javascript_only_service_refuses_python_cells_by_name(tmp_path: Path):
    """With python_cells = false a Python cell (and the Python tool description) is a 422 naming ``language``
    and the setting; JavaScript cells run as before."""
    with make_client(tmp_path, python_cells=False) as client:
        r = client.post("/v1/exec", json={"code": "1", "language": "python"})
        assert r.status_code == 422, r.text
        body = r.json()["error"]
        assert body["need_param"] == "language" and "python_cells" in body["message"], body
        r = client.get("/v1/tool-description", params={"language": "python"})
        assert r.status_code == 422 and r.json()["error"]["need_param"] == "language", r.text
        assert run(client, "return 1")["value"] == 1
        assert client.get("/v1/tool-description").status_code == 200


def _kinds(client) -> dict[int, bool]:
    """Every live worker of the service's pool: whether it has Monty mapped, by pid."""
    return {w.pid: MONTY in Path(f"/proc/{w.pid}/maps").read_text() for w in client.app.state.services.pool.workers()}


def test_javascript_cells_never_run_in_a_process_made_for_python_cells(tmp_path: Path):
    """With Python cells on, a principal's JavaScript and Python cells run in two processes of two kinds:
    the JavaScript one has no Monty mapped and no child (so it keeps the strict profile, which refuses
    starting programs and executable memory); the Python one has Monty and its one child."""
    with make_client(tmp_path, sandbox="off", worker_isolation="tenant") as client:
        js = run(client, "return globalThis.process === undefined")
        py = run(client, "1 + 1", language="python")
        assert js["value"] is True and py["value"] == 2, (js, py)
        pool = client.app.state.services.pool
        kinds = _kinds(client)
        python_pids = {w.pid for w in pool.workers() if w.python}
        assert python_pids and set(kinds) - python_pids, kinds  # both kinds exist
        for pid, monty in kinds.items():
            assert monty is (pid in python_pids), (pid, kinds)
            assert len(_children(pid)) == (1 if pid in python_pids else 0)
        # Each cell ran in a process of its kind, bound to the same tenant: two bindings, never one.
        assigned = {w.pid: w.python for w in pool.assigned.all()}
        assert sorted(assigned.values()) == [False, True], assigned


def test_a_javascript_only_service_starts_no_process_for_python(tmp_path: Path):
    """With python_cells off no worker of the service has Monty mapped or a child."""
    with make_client(tmp_path, python_cells=False, sandbox="off") as client:
        assert run(client, "return 1")["value"] == 1
        kinds = _kinds(client)
        assert kinds and not any(kinds.values()), kinds
        assert all(not _children(pid) for pid in kinds)
