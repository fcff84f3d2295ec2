"""The worker process on its own: frames in, frames out, and it survives what a cell does to its engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.framing import HEADER_SIZE, encode_frame, encode_raw, frame_length
from bridge.messages import (
    DoneFrame,
    FailureHead,
    GuestRequest,
    HostFrame,
    IdleFrame,
    Language,
    ReadyFrame,
    drop_frame,
    run_frame,
    settle_frame,
)
from bridge.received import completed, control_frame, raw_frames_after
from service.runtime.workers.sandbox import sandbox_options
from tests.support.polling import poll_until

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    def __init__(self, **options: Any) -> None:
        """``options``: more worker options (``python``)."""
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        # Confined as the pool's workers are (the service builds these options once).
        options = {"sandbox": sandbox_options("auto", "nobody"), **options}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "guest_runtime.worker", json.dumps(options)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.ready = self.recv()

    def send(self, message: HostFrame) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode_frame(message))
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        """The next frame with its raw frames in place, as the host reads it (``bridge.received``); an
        idle frame's raw argument frames are also kept, as bytes, in ``raw_args``."""
        frame: Any = control_frame(self._body())
        frame = completed(frame, [self._body() for _ in range(raw_frames_after(frame))])
        if frame["t"] == "idle":
            self.raw_args = [r["args"] for r in frame["requests"]]
        return frame  # type: ignore[no-any-return]

    def _body(self) -> bytes:
        assert self.proc.stdout is not None
        header = self.proc.stdout.read(HEADER_SIZE)
        return self.proc.stdout.read(frame_length(header))

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode_raw(data))
        self.proc.stdin.flush()

    def run(self, code: str, language: Language = "javascript") -> dict[str, Any]:
        """Run one cell that needs no host replies; return its done frame."""
        self.start(code, language=language)
        msg = self.recv()
        assert msg["t"] == "done", msg
        return msg

    def start(self, code: str, budget_ms: int = 3000, language: Language = "javascript") -> None:
        self.send(
            run_frame(
                cell_id="c",
                code=code,
                budget_ms=budget_ms,
                memory_limit_bytes=32 << 20,
                max_output_bytes=65536,
                value_capture_bytes=65536,
                config={"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
                language=language,
            )
        )


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    w = WorkerProcess()
    yield w
    w.proc.kill()
    w.proc.wait()


CASES = {
    "lone surrogate in an error message": (r"throw new Error('x\ud800')", "Error: x\ufffd"),
    "deep tool arguments": (
        "let v = 1; for (let i = 0; i < 254; i++) v = [v]; await results.save(v)",
        "TypeError: value is nested more than 200 levels deep",
    ),
    "species getter that throws in the start call": (
        "Object.defineProperty(Promise.prototype, 'constructor', {get() { throw new Error('species') }})",
        "Error: species",
    ),
    "a stall with an unhandled rejection": (
        "void Promise.reject(new RangeError('lost')); await new Promise(() => {})",
        "Unhandled promise rejection: RangeError: lost",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_cell_failures_keep_the_worker_process(worker, name):
    """Each case fails only its cell (no recycle), and the same process completes the next cell."""
    code, error = CASES[name]
    done = worker.run(code)
    assert done["ok"] is False and done["recycle"] is False
    assert done["text"].startswith(error), done
    assert done["error"]["code"] == "uncaught_error"
    after = worker.run("return 'next'")
    assert after["ok"] is True and after["text"] == '"next"'
    assert worker.proc.poll() is None and worker.ready["pid"] == worker.proc.pid


def test_a_typescript_cell_is_read_inside_the_confined_worker():
    """The TypeScript parser is loaded before the worker confines itself and parses after: a typed cell with
    a large source (read whole, its syntax tree freed and trimmed), then a refused one, then a plain one."""
    worker = WorkerProcess()  # its own: a slow machine must not cost the module's worker a timeout
    try:
        typed = "const xs: number[] = [1, 2, 3];\n" + "xs[0] = (xs[0]! + 0) as number;\n" * 9_000 + "return xs"
        worker.start(typed, budget_ms=60_000)
        done = worker.recv()
        assert done["ok"] is True, done.get("error")
        assert done["text"] == "[1,2,3]"
        refused = worker.run("enum E { A }")
        assert refused["error"]["code"] == "invalid_input" and "TypeScript enum" in refused["text"]
        assert worker.run("return 1 < 2")["text"] == "true"
        assert worker.proc.poll() is None
        sandbox = worker.ready["sandbox"]
        assert "seccomp" in sandbox["layers"] or sandbox["missing"]["seccomp"], sandbox
    finally:
        worker.proc.kill()
        worker.proc.wait()


def test_frames_carry_exactly_their_typed_fields(worker):
    """ready, idle and both kinds of done frame have the keys bridge.messages declares, no more, no fewer
    (besides what the host's reader sets from the raw frames: ``shipped``, ``text``, each request's ``args``)."""
    assert set(worker.ready) == ReadyFrame.__required_keys__
    worker.start("text('x'); await new Promise(r => setTimeout(r, 1)); return 1")
    idle = worker.recv()
    assert idle["t"] == "idle" and set(idle) == IdleFrame.__required_keys__ | {"shipped"}, idle
    assert idle["output"] == {"entries": 1} and idle["shipped"] == [{"json": '{"type":"text","text":"x"}'}]
    [request] = idle["requests"]
    assert set(request) == GuestRequest.__required_keys__ | {"args"}, request
    assert worker.raw_args == [b"[1]"]  # the arguments follow as a raw frame, the JSON text the guest wrote
    worker.send(settle_frame("c", 3000, [{"id": request["id"], "ok": True}]))
    worker.send_raw(b"null")
    done = worker.recv()
    assert done["t"] == "done" and set(done) == DoneFrame.__required_keys__ | {"value", "shipped", "text"}, done
    failed = worker.run("null.boom")
    assert set(failed) == DoneFrame.__required_keys__ | {"error", "shipped", "text"}, failed
    assert set(failed["error"]) == FailureHead.__required_keys__


def _cell(rt: str, code: str, budget_ms: int = 3000) -> HostFrame:
    """The run frame of a cell with no tools."""
    return run_frame(
        cell_id=rt,
        code=code,
        budget_ms=budget_ms,
        memory_limit_bytes=32 << 20,
        max_output_bytes=65536,
        value_capture_bytes=65536,
        config={"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
    )


def _start(worker: WorkerProcess, rt: str, code: str) -> dict[str, Any]:
    worker.send(_cell(rt, code))
    return worker.recv()


def _settle(worker: WorkerProcess, rt: str, request_id: int, payload: str) -> dict[str, Any]:
    worker.send(settle_frame(rt, 3000, [{"id": request_id, "ok": True}]))
    worker.send_raw(payload.encode())
    return worker.recv()


def test_one_process_holds_many_runtimes_each_with_its_own_state(worker):
    """Blocked runtimes stay in the worker's table; settles name them, in any order; a drop frees one."""
    code = "globalThis.mine = {name}; const got = await yield_control('p'); return [mine, got]"
    idles = {rt: _start(worker, rt, code.format(name=repr(rt))) for rt in ("a", "b", "c")}
    for rt, idle in idles.items():
        assert idle["t"] == "idle" and idle["rt"] == rt, idle
    worker.send(drop_frame("b"))
    for rt in ("c", "a"):
        done = _settle(worker, rt, idles[rt]["requests"][0]["id"], f'"reply-{rt}"')
        assert done["t"] == "done" and done["rt"] == rt and done["ok"], done
        assert done["text"] == f'["{rt}","reply-{rt}"]'
    # The dropped runtime is gone: a late settle for it is skipped, payload and all.
    worker.send(settle_frame("b", 3000, [{"id": idles["b"]["requests"][0]["id"], "ok": True}]))
    worker.send_raw(b'"late"')
    assert worker.run("return 'after'")["text"] == '"after"'


def test_unhandled_rejections_stay_with_their_runtime(worker):
    """A rejection nobody handled in one parked runtime fails that cell only, not the next one to finish."""
    a = _start(worker, "ra", "void Promise.reject(new Error('mine')); await yield_control('p'); return 1")
    b = _start(worker, "rb", "await yield_control('p'); return 2")
    done_b = _settle(worker, "rb", b["requests"][0]["id"], "null")
    assert done_b["ok"] and done_b["text"] == "2", done_b
    done_a = _settle(worker, "ra", a["requests"][0]["id"], "null")
    assert not done_a["ok"] and "mine" in done_a["text"], done_a


@pytest.mark.slow
def test_dropped_runtimes_give_their_memory_back(worker):
    """A parked runtime of ~60 MB of small objects, dropped while a later runtime still lives above it in
    the heap: the worker hands the freed pages back to the kernel (RSS falls), it does not keep them."""
    big = "globalThis.keep = Array.from({length: 6e5}, (_, i) => ({i, s: 'v' + i})); await yield_control('p')"
    small = "globalThis.keep = [1, 2, 3]; await yield_control('p')"
    for rt, code in (("big", big), ("above", small)):
        worker.send(
            run_frame(
                cell_id=rt,
                code=code,
                budget_ms=10000,
                memory_limit_bytes=256 << 20,
                max_output_bytes=65536,
                value_capture_bytes=65536,
                config={"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
            )
        )
        assert worker.recv()["t"] == "idle"
    parked = _rss(worker.proc.pid)
    worker.send(drop_frame("big"))
    assert worker.run("return 1")["text"] == "1"  # the drop was handled before this cell ran
    poll_until(lambda: _rss(worker.proc.pid) < parked - 30 * 2**20, "the dropped runtime's memory is given back")
    worker.send(drop_frame("above"))


def test_small_cells_in_a_row_keep_the_heap_the_next_engines_reuse(worker):
    """Each cell frees a runtime of a few hundred KiB, which the next engine takes again: the worker keeps
    those pages instead of trimming them every 4 MiB freed, after which each fresh engine faulted about
    3 pages a cell back in.  (Large freed runtimes are still given back: the test above.)"""
    for _ in range(40):
        worker.run("return 1")
    before = _minor_faults(worker.proc.pid)
    cells = 200
    for _ in range(cells):
        assert worker.run("return 1")["text"] == "1"
    assert (_minor_faults(worker.proc.pid) - before) / cells < 1.5


MEMORY_BOMBS = [
    'const a = []; while (true) a.push("x".repeat(1e5) + a.length)',
    "const a = []; while (true) a.push([a.length, {x: a.length}])",
    "const m = new Map(); for (let i = 0;; i++) m.set(i, {i, s: 'y' + i})",
    "const a = []; for (;;) a.push(new ArrayBuffer(1 << 20))",
]


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


@pytest.mark.slow
def test_an_engine_memory_limit_failure_keeps_the_process_and_leaks_nothing(worker):
    """A cell over the engine's heap cap fails memory_limit_exceeded without asking for a recycle (QuickJS
    unwinds the failed allocation and the runtime is freed after the cell), the same process runs the next
    cell, and five rounds of four kinds of bomb leave it no larger than the first round did."""
    sizes = []
    for _ in range(5):
        for code in MEMORY_BOMBS:
            # A budget long enough for a loaded machine: the heap cap, not the clock, must end the cell.
            worker.send(
                run_frame(
                    cell_id="c",
                    code=code,
                    budget_ms=30000,
                    memory_limit_bytes=16 << 20,
                    max_output_bytes=65536,
                    value_capture_bytes=65536,
                    config={"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
                )
            )
            done = worker.recv()
            assert (done["ok"], done["recycle"], done["error"]["code"]) == (False, False, "memory_limit_exceeded")
        sizes.append(_rss(worker.proc.pid))
    assert worker.run("return 'next'")["text"] == '"next"'
    assert worker.proc.poll() is None and worker.ready["pid"] == worker.proc.pid
    assert max(sizes[1:]) <= sizes[0] + (16 << 20), [s >> 20 for s in sizes]


def _tool(name: str) -> dict[str, str]:
    return {
        "callableName": name,
        "toolName": name,
        "description": f"the {name} tool",
        "source": "plugin",
        "input": "{}",
    }


def test_engines_prepared_while_idle_follow_the_configuration(worker):
    """After two cells with one tool list the next engine is configured while idle; a cell with another
    list still gets exactly its own tools, and so does the one after it."""
    lists = [["alpha"], ["alpha"], ["alpha"], ["alpha"], ["beta"], ["beta"], ["beta"], ["alpha"]]
    code = "return ['alpha', 'beta'].filter(n => typeof globalThis[n] === 'function' && globalThis[n].toolName === n)"
    for i, names in enumerate(lists):
        worker.send(
            run_frame(
                cell_id=f"cfg{i}",
                code=code,
                budget_ms=3000,
                memory_limit_bytes=32 << 20,
                max_output_bytes=65536,
                value_capture_bytes=65536,
                config={"tools": [_tool(n) for n in names], "mcp": [], "maxRequestBytes": 1 << 20},
            )
        )
        done = worker.recv()
        assert done["t"] == "done" and done["ok"], done
        assert done["text"] == json.dumps(names, separators=(",", ":")), (i, done)


class _ScriptedHost:
    """The worker's channel in memory, for ``Runtimes`` in this process: each frame the worker writes is
    answered by ``answer`` (a frame, a payload for the raw frame after a settle, or None to end)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.inbox: list[HostFrame] = []
        self.payloads: list[str] = []
        self.written: list[dict[str, Any]] = []

    def read(self) -> HostFrame | None:
        return self.inbox.pop(0) if self.inbox else None

    def read_raw(self) -> str:
        return self.payloads.pop(0)

    def write(self, message: dict[str, Any], attachments: Any = ()) -> None:
        self.written.append(message)
        self.answer(self, message)


def _runs(*rts: str) -> list[HostFrame]:
    code = "for (let i = 0; i < 6; i++) await yield_control('p'); return 1"
    return [_cell(rt, code, budget_ms=10_000) for rt in rts]


def _answer_yields(host: _ScriptedHost, message: dict[str, Any]) -> None:
    if message["t"] == "idle":
        host.inbox.append(settle_frame(message["rt"], 10_000, [{"id": message["requests"][0]["id"], "ok": True}]))
        host.payloads.append("null")


def _cpu_clock_reads(monkeypatch, host: _ScriptedHost) -> list[str]:
    """Serve ``host``'s frames; the kind of frame each reading of the process CPU clock came just before."""
    from guest_runtime import worker as worker_module

    reads: list[str] = []
    process_time = worker_module.time.process_time

    def counted() -> float:
        reads.append(host.written[-1]["t"] if host.written else "-")
        return process_time()

    runtimes = worker_module.Runtimes(host, 1 << 20, float("inf"))  # type: ignore[arg-type]
    monkeypatch.setattr(worker_module.time, "process_time", counted)
    assert runtimes.serve() == 0
    return reads


def test_a_runtime_s_next_slice_starts_from_its_last_cpu_reading(monkeypatch):
    """Between two slices of one runtime the worker only waits and reads the reply, so the next slice
    starts from the reading the idle frame took: one reading of the CPU clock (a system call) per tool
    call, not two.  The first slice's successor reads again (an engine was built while idle)."""
    host = _ScriptedHost(_answer_yields)
    host.inbox = _runs("a")
    reads = _cpu_clock_reads(monkeypatch, host)
    done = host.written[-1]
    assert done["t"] == "done" and done["ok"] and done["cpu_ms"] > 0, done
    cpu = [frame["cpu_ms"] for frame in host.written]
    assert cpu == sorted(cpu), cpu
    # run: start + idle; settle 1: start (after the idle engine build) + idle; settles 2-5: idle; 6: done.
    assert len(reads) == 2 + 2 + 4 + 1, reads


def test_a_slice_after_other_work_reads_the_cpu_clock_again(monkeypatch):
    """When another runtime ran in between, the slice reads the clock afresh: the other runtime's CPU is
    never charged to this one."""

    host = _ScriptedHost(_answer_yields)
    host.inbox = _runs("a", "b")  # b starts while a waits: their settles then alternate
    reads = _cpu_clock_reads(monkeypatch, host)
    assert [f["t"] for f in host.written if f["t"] == "done"] == ["done", "done"]
    # Each runtime: run start + idle; then every settle reads at its start (the other ran since) and idle;
    # its last settle reads at its start and for the done frame.
    assert len(reads) == 2 * (2 + 5 * 2 + 2), reads


def test_a_javascript_only_worker_refuses_a_python_cell_and_serves_on():
    """A worker started without Python (``python: false``, never loads Monty) answers a Python cell that reached
    it anyway with runtime_unavailable, and its next JavaScript cell runs in the same process."""
    worker = WorkerProcess(python=False)
    try:
        done = worker.run("1", language="python")
        assert done["ok"] is False and done["error"]["code"] == "runtime_unavailable", done
        assert done["text"] == "this worker runs no Python cells (python_cells = false)"
        after = worker.run("return 'next'")
        assert after["ok"] is True and after["text"] == '"next"'
        assert worker.proc.poll() is None
    finally:
        worker.proc.kill()
        worker.proc.wait()
