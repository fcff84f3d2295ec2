"""A waiting Python cell whose kept Monty session lost its child (killed from outside) resumes from its bytes.

The cell's snapshot stays live in its session while it waits (``MontyPool.keep``), and its bytes are dumped
all the same; if the child dies meanwhile (the OOM killer, an operator), the cell resumes from those bytes
in the next child instead of failing.  A child that dies under the cell itself (its hard memory limit) still
fails the cell.  Real parts: a real Monty child, killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from bridge import jsoncodec
from guest_runtime.engine import Returned, Waiting
from guest_runtime.monty.engine import MontyPool, PythonEngine
from tests.support.polling import poll_until

MiB = 1024 * 1024
CONFIG = jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB})


def _monty_children() -> list[int]:
    """The ``monty`` processes this test process started (its pool's child), alive (not yet reaped is dead)."""
    pids = [int(c) for task in Path("/proc/self/task").iterdir() for c in (task / "children").read_text().split()]
    return [pid for pid in pids if _state(pid).startswith("monty) ") and not _state(pid).startswith("monty) Z")]


def _state(pid: int) -> str:
    """``comm) state ...`` of ``pid``'s stat line ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(" (", 1)[1]
    except (OSError, IndexError):
        return ""


def test_a_waiting_cell_whose_child_was_killed_resumes_from_its_bytes():
    pool = MontyPool()
    try:
        engine = PythonEngine(pool)
        engine.configure(CONFIG, 64 * MiB)
        engine.compile("x = 6\nawait sleep(0)\nx * 7", 5.0)
        waiting = engine.start(time.monotonic() + 5)
        assert isinstance(waiting, Waiting) and pool.holds(engine)
        (child,) = _monty_children()
        os.kill(child, signal.SIGKILL)
        poll_until(lambda: child not in _monty_children(), "the killed child is gone")
        request_id = waiting.requests[0]["id"]
        ended = engine.resume([(request_id, True, None)], time.monotonic() + 5)
        assert isinstance(ended, Returned), ended
        assert engine.final_value(MiB, time.monotonic() + 5) == "42"
        engine.close()
        assert len(_monty_children()) == 1, "a new child took the old one's place"
    finally:
        pool.close()
