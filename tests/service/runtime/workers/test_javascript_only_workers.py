"""A JavaScript-only service (``python_cells = false``) starts no Monty machinery and refuses Python cells.

A worker loads Monty before it confines itself (afterwards it can open no file), so whether it can run
Python cells is fixed when it starts: ``python_cells`` decides it for every worker of the service.  What a
worker loaded is read from its memory map (``/proc/<pid>/maps``), for a worker started as the pool starts
them, with Python and without.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("python_cells", [True, False])
def test_the_pool_starts_its_workers_as_the_setting_says(tmp_path: Path, python_cells: bool):
    """Every worker the service starts has Monty mapped exactly when python_cells is on."""
    with make_client(tmp_path, python_cells=python_cells, sandbox="off") as client:
        assert run(client, "return 1")["value"] == 1
        pool = client.app.state.services.pool
        workers = pool.workers()
        assert workers
        for worker in workers:
            assert (MONTY in Path(f"/proc/{worker.pid}/maps").read_text()) is python_cells
            assert len(_children(worker.pid)) == (1 if python_cells else 0)
