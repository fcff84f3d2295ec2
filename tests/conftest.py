"""Shared fixtures: a real service (real worker processes, real SQLite file) behind TestClient."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.assembly import build_components
from service.settings import Settings
from tests.support.tools import TEST_TOOLS

#: The suite's services run their workers at the service's own priority (``worker_nice`` 0; the default puts
#: them 15 niceness steps lower).  On a busy machine a worker 15 steps below the machine's other processes
#: gets about 3% of a CPU, and every cell's deadline then measures the machine's load rather than the code
#: under test.  Services started as processes get the same (``tests/support/live_server.py``, the CLI tests'
#: environments).  The tests about priorities set ``worker_nice`` themselves or read the pool's own
#: ``priorities.normal`` (test_hostile_cells.py, test_capacity_sharing.py, workers/test_worker_pool.py).
SUITE_WORKER_NICE = "0"
os.environ.setdefault("CODEMODE_WORKER_NICE", SUITE_WORKER_NICE)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_client(
    tmp: Path,
    *,
    results_clock: Callable[[], float] | None = None,
    cells_clock: Callable[[], float] | None = None,
    extra_tools: Sequence[Any] = TEST_TOOLS,
    **overrides: Any,
) -> TestClient:
    """A TestClient over a fully wired app; use it as a context manager (runs the lifespan).

    ``results_clock`` dates saved results, so retention tests move time instead of waiting it out;
    ``cells_clock`` dates cell idleness and expiry, so TTL tests move it too (the registry then
    sweeps every 20 ms); ``extra_tools`` are the tools defined in code (tests/support/tools.py).
    """
    # A test sizes its service with ``workers``: it gets as many running slots, whatever CPUs run the suite.
    overrides.setdefault("running_slots", overrides.get("workers", 2))
    # A worker start (run at a low priority) can take seconds on a loaded machine: the suite waits for one
    # far longer than the service's default; a test about the wait sets its own acquire_timeout_ms.
    settings = (
        Settings(workers=2, data_dir=str(tmp), kill_grace_ms=500, acquire_timeout_ms=60000).replace(**overrides).check()
    )
    services = build_components(settings, extra_tools=extra_tools, results_clock=results_clock, cells_clock=cells_clock)
    return TestClient(create_app(settings, services))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One running service per test module (workers are warm and shared by its tests)."""
    with make_client(tmp_path_factory.mktemp("svc")) as c:
        yield c


def run(client: TestClient, code: str, **fields: Any) -> dict[str, Any]:
    """POST /v1/exec and return the envelope (asserting HTTP 200)."""
    r = client.post("/v1/exec", json={"code": code, **fields})
    assert r.status_code == 200, r.text
    return r.json()


def run_ok(client: TestClient, code: str, **fields: Any) -> dict[str, Any]:
    """``run`` for a cell that must complete; returns the envelope."""
    env = run(client, code, **fields)
    assert env["status"] == "completed", env.get("error", env)
    return env


def value_of(env: dict[str, Any]) -> Any:
    """The value of an envelope that must be ``completed``."""
    assert env["status"] == "completed", env.get("error", env)
    return env["value"]


def wait(client: TestClient, cell_id: str, **body: Any) -> dict[str, Any]:
    """POST /v1/cells/{cell_id}/wait and return the envelope (asserting HTTP 200)."""
    r = client.post(f"/v1/cells/{cell_id}/wait", json=body)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def parked_calls_settled(client: TestClient, cell_id: str) -> bool:
    """Whether a parked cell has no tool call still running (every reply is queued for its next leg)."""
    snapshot = client.get(f"/v1/cells/{cell_id}").json()
    return snapshot["status"] == "waiting" and snapshot["pending_tool_calls"] == []
