"""A worker that runs Python cells and its one Monty child: memory held by the child's allocator limit, a
child that dies loses only its cell, and the child is started once and reused.

Real parts: the worker process confined as the pool starts it (``WorkerProcess``), its real ``monty``
child, read through ``/proc``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.messages import Language, run_frame, settle_frame
from tests.guest_runtime.test_worker import WorkerProcess

MiB = 1024 * 1024
#: The issue's case: three million small strings.
STRINGS = "x = [str(i) for i in range(3 * 10**6)]\nlen(x)"
#: What the Monty child may hold over a cell's memory limit: its own base (~8 MiB idle: binary, thread
#: stacks, allocator metadata) and the block it was refused while it grew (a list's doubling).
SLACK_BYTES = 32 * MiB


@pytest.fixture
def worker() -> Iterator[WorkerProcess]:
    w = WorkerProcess()
    yield w
    w.proc.kill()
    w.proc.wait()


def monty_child(worker: WorkerProcess) -> int:
    pid = worker.ready["pid"]
    (child,) = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return child


def peak_bytes(pid: int) -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM"))
    return int(line.split()[1]) * 1024


def start(worker: WorkerProcess, rt: str, code: str, language: Language = "python", memory: int = 64 * MiB) -> Any:
    worker.send(
        run_frame(
            cell_id=rt,
            code=code,
            budget_ms=20000,
            memory_limit_bytes=memory,
            max_output_bytes=65536,
            value_capture_bytes=65536,
            config={"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
            language=language,
        )
    )
    return worker.recv()


def settle(worker: WorkerProcess, rt: str, idle: Any, payload: bytes) -> Any:
    worker.send(settle_frame(rt, 5000, [{"id": idle["requests"][0]["id"], "ok": True}]))
    worker.send_raw(payload)
    return worker.recv()


def test_the_issues_memory_bomb_fails_within_the_stated_slack(worker):
    """Three million strings under a 64 MiB limit: memory_limit_exceeded (the worker stays), while the Monty
    child's peak resident memory stays within the limit plus SLACK_BYTES; the next cell runs."""
    child = monty_child(worker)
    done = start(worker, "bomb", STRINGS, memory=64 * MiB)
    assert (done["ok"], done["error"]["code"], done["recycle"]) == (False, "memory_limit_exceeded", False), done
    assert peak_bytes(child) <= 64 * MiB + SLACK_BYTES, peak_bytes(child) // MiB
    assert start(worker, "next", "40 + 2")["text"] == "42"


def test_a_cell_that_kills_its_monty_child_loses_nothing_else(worker):
    """A cell that reaches Monty's hard memory limit ends its child (exit 65): it fails
    memory_limit_exceeded, the worker starts a new child, and a Python and a JavaScript cell parked in the
    same worker before it resume with their own state."""
    first = monty_child(worker)
    parked_py = start(worker, "py", "mine = 'py'\ngot = await yield_control('p')\n[mine, got]")
    parked_js = start(worker, "js", "const mine = 'js'; return [mine, await yield_control('p')]", "javascript")
    assert parked_py["t"] == parked_js["t"] == "idle"
    done = start(worker, "bomb", STRINGS, memory=256 * MiB)
    assert (done["ok"], done["error"]["code"], done["recycle"]) == (False, "memory_limit_exceeded", False), done
    assert settle(worker, "py", parked_py, b'"back"')["text"] == '["py","back"]'
    assert settle(worker, "js", parked_js, b'"back"')["text"] == '["js","back"]'
    assert monty_child(worker) != first  # the first child is gone; its replacement served the resume


def test_one_child_serves_every_python_cell_of_the_worker(worker):
    """The child is started with the worker (before it says ready) and reused: cells in a row run in it."""
    child = monty_child(worker)
    for n in range(5):
        assert start(worker, f"c{n}", f"{n} * 2")["text"] == str(n * 2)
    assert monty_child(worker) == child


def test_a_parked_cell_resumes_in_another_engine_from_its_bytes():
    """A parked cell's ``dump`` is all a fresh engine needs (``restore``) to resume it in a new Monty
    session, with the state the cell had and the reply settled into it."""
    import time

    from bridge import jsoncodec
    from guest_runtime.engine import Returned, Waiting
    from guest_runtime.monty.engine import PythonEngine

    config = jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB})
    first = PythonEngine()
    first.configure(config, 32 * MiB)
    first.compile("mine = [1, 2]\ngot = await yield_control('p')\nmine + [got]", 5.0)
    waiting = first.start(time.monotonic() + 5.0)
    assert isinstance(waiting, Waiting)
    data = first.dump()
    first.close()
    second = PythonEngine()
    second.configure(config, 32 * MiB)
    assert second.restore(data) == 1  # the one request it awaits
    done = second.resume([(waiting.requests[0]["id"], True, "3")], time.monotonic() + 5.0)
    assert isinstance(done, Returned), done
    assert second.final_value(MiB, time.monotonic() + 5.0) == "[1,2,3]"


def _sequential(engine: Any, calls: int) -> Any:
    """Answer each of a cell's ``yield_control`` calls in turn (the reply: its number), until it ends."""
    import time

    from guest_runtime.engine import Waiting

    outcome = engine.start(time.monotonic() + 5.0)
    for n in range(calls):
        assert isinstance(outcome, Waiting), outcome
        outcome = engine.resume([(outcome.requests[0]["id"], True, str(n))], time.monotonic() + 5.0)
    return outcome


def test_a_parked_cell_keeps_its_session_until_another_cell_needs_the_child(monkeypatch: pytest.MonkeyPatch):
    """A cell waiting on the host keeps its session checked out: twenty sequential calls check the child out
    once.  Another cell's slice takes the child (the kept session is closed); the first resumes from its
    bytes with its state, and keeps its new session in turn."""
    import time

    from bridge import jsoncodec
    from guest_runtime.engine import Returned, Waiting
    from guest_runtime.monty.engine import MontyPool, PythonEngine

    pool = MontyPool()
    opened = []
    real_open = pool.open
    monkeypatch.setattr(pool, "open", lambda limits: opened.append(1) or real_open(limits))
    config = jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB})
    try:
        first = PythonEngine(pool)
        first.configure(config, 32 * MiB)
        first.compile("t = 0\nfor i in range(21):\n    t += await yield_control('p')\nt", 5.0)
        waiting = _sequential(first, 20)
        assert isinstance(waiting, Waiting) and pool.holds(first)
        assert len(opened) == 1, "one checkout for the cell and its twenty host calls"

        other = PythonEngine(pool)
        other.configure(config, 32 * MiB)
        other.compile("40 + 2", 5.0)
        assert isinstance(other.start(time.monotonic() + 5.0), Returned)
        assert not pool.holds(first) and len(opened) == 2

        done = first.resume([(waiting.requests[0]["id"], True, "20")], time.monotonic() + 5.0)
        assert isinstance(done, Returned), done
        assert first.final_value(MiB, time.monotonic() + 5.0) == str(sum(range(21)))
        assert len(opened) == 3  # the resume from bytes
        first.close()
        assert not pool.holds(first)
    finally:
        pool.close()


def test_closing_a_parked_cell_hands_its_kept_session_back():
    """A parked cell the host ends (cancel, expiry) hands the child back: the next cell checks it out."""
    import time

    from bridge import jsoncodec
    from guest_runtime.engine import Returned, Waiting
    from guest_runtime.monty.engine import MontyPool, PythonEngine

    pool = MontyPool()
    config = jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB})
    try:
        parked = PythonEngine(pool)
        parked.configure(config, 32 * MiB)
        parked.compile("await yield_control('p')", 5.0)
        assert isinstance(parked.start(time.monotonic() + 5.0), Waiting) and pool.holds(parked)
        parked.close()
        assert not pool.holds(parked)
        following = PythonEngine(pool)
        following.configure(config, 32 * MiB)
        following.compile("'next'", 5.0)
        assert isinstance(following.start(time.monotonic() + 5.0), Returned)
        assert following.final_value(MiB, time.monotonic() + 5.0) == '"next"'
    finally:
        pool.close()
