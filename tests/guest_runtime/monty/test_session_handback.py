"""A finished Python cell's Monty session goes back to the child after the cell's answer, not before it.

Ending a session is a round trip to the worker's one ``monty`` child (~0.1 ms on an idle machine): the pool
keeps a finished cell's session (``MontyPool.release``) until the worker, having sent the cell's frame,
waits for the next one (``Runtimes``' idle hook, ``MontyPool.tidy``), or until the child is needed first.
Real parts: a real Monty child (``MontyPool``) and the worker's own loop (``Runtimes``) on an in-memory
channel.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from bridge import jsoncodec
from bridge.messages import HostFrame, WorkerFrame, run_frame
from guest_runtime.engine import Returned
from guest_runtime.monty import engine as monty_engine
from guest_runtime.monty.engine import MontyPool, PythonEngine
from guest_runtime.worker import Runtimes

MiB = 1024 * 1024
CONFIG = jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB})


@pytest.fixture
def pool() -> Any:
    pool = MontyPool()
    yield pool
    pool.close()


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The sessions handed back to the child, in order."""
    sessions: list[object] = []
    real = monty_engine.close
    monkeypatch.setattr(monty_engine, "close", lambda s: sessions.append(s) or real(s))
    return sessions


def _finished(pool: MontyPool, code: str) -> str:
    engine = PythonEngine(pool)
    engine.configure(CONFIG, 32 * MiB)
    engine.compile(code, 5.0)
    assert isinstance(engine.start(time.monotonic() + 5.0), Returned)
    value = engine.final_value(MiB, time.monotonic() + 5.0)
    engine.close()
    return value


def test_a_finished_cells_session_goes_back_at_tidy_and_the_next_cell_opens_after_it(pool, closed):
    assert _finished(pool, "6 * 7") == "42"
    assert closed == [], "the session is still out when the cell's answer is ready"
    pool.tidy()
    assert len(closed) == 1
    pool.tidy()
    assert len(closed) == 1, "handed back once"
    # Without a tidy between them, the next cell's checkout hands the last session back first.
    assert _finished(pool, "1") == "1"
    assert _finished(pool, "2") == "2"
    assert len(closed) == 2
    pool.close()
    assert len(closed) == 3


class _Channel:
    """The worker's channel in memory: ``frames`` in, each frame out recorded with the idle calls before it."""

    def __init__(self, frames: list[HostFrame], log: list[str]) -> None:
        self.frames = frames
        self.log = log

    def read(self) -> HostFrame | None:
        return self.frames.pop(0) if self.frames else None

    def write(self, message: WorkerFrame, attachments: object = ()) -> None:
        self.log.append(str(message["t"]))


def test_the_worker_runs_its_idle_hook_after_each_answer():
    log: list[str] = []
    frames: list[HostFrame] = [
        run_frame(
            cell_id=f"c{n}",
            code="return 1",
            budget_ms=10_000,
            memory_limit_bytes=64 * MiB,
            max_output_bytes=65_536,
            value_capture_bytes=65_536,
            config={"tools": [], "mcp": [], "maxRequestBytes": MiB},
        )
        for n in range(2)
    ]
    runtimes = Runtimes(_Channel(frames, log), MiB, float("inf"), idle=lambda: log.append("idle"))  # type: ignore[arg-type]
    assert runtimes.serve() == 0
    assert log == ["done", "idle", "done", "idle"]
