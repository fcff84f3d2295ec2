"""A worker that stops reading its pipe (a stand-in for one an attacker owns): what the service writes
waits in the transport, ``Worker.pipe_empty`` says so, and a writer that ``drain``s after each write,
as a cell's leg does, stops once the transport holds its high-water mark.  A leg answers in place only
into an empty pipe and otherwise writes and drains (``service/runtime/cell.py``), so such a worker holds
up its own leg, never more of the service's memory than that.  Then the same from a cell down: a worker
that floods tool calls and reads no reply gets its calls a few per turn of the loop, fills its pipe and
the transport's high-water mark, and its cell ends at its deadline as a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json

import pytest

from bench import loops
from bridge.framing import encode_frame
from bridge.messages import CONTROL_FRAME_BYTES, CONTROL_FRAME_VALUES, drop_frame
from service.assembly import build_components
from service.auth import LOCAL_TENANT
from service.errors import WorkerGone
from service.runtime.spec import CellSpec
from service.runtime.workers import supply
from service.runtime.workers.process import start_worker
from service.settings import Settings
from service.tools import ToolSpec

CAP = 1 << 20
#: Bytes of padding in each reply of the flooding test's tool.
REPLY_BYTES = 24 * 1024


@pytest.mark.parametrize("run", [asyncio.run, loops.run], ids=["asyncio", "uvloop"])
def test_a_worker_that_stops_reading_holds_up_its_writer_not_the_services_memory(run):
    frame = drop_frame("x" * 1000)  # any host frame: the worker reads none of them

    async def scenario() -> dict[str, object]:
        # A real worker process, unconfined (confinement is not under test), running the test payload.
        plan = {"probes": [], "linger_s": 60}
        worker = await start_worker({"frame_cap": CAP, "sandbox": {"mode": "off"}}, CAP, test_payload=json.dumps(plan))
        assert worker.proc.stdin is not None
        transport = worker.proc.stdin.transport
        written = 0

        async def write_and_drain() -> None:
            nonlocal written
            while True:
                worker.write(frame)
                written += 1
                await worker.drain()

        try:
            assert (await worker.recv())["t"] == "probes"
            was_empty = worker.pipe_empty
            writing = asyncio.ensure_future(write_and_drain())
            await asyncio.sleep(0.3)
            out = {
                "was_empty": was_empty,
                "empty_now": worker.pipe_empty,
                "writing": not writing.done(),
                "written": written,
                "buffered": transport.get_write_buffer_size(),
                "high": transport.get_write_buffer_limits()[1],
            }
            worker.kill("the test is done with it")
            with contextlib.suppress(WorkerGone):  # the writer ends once the worker is gone
                await asyncio.wait_for(writing, 10)
            return out
        finally:
            worker.kill()
            await worker.proc.wait()

    out = run(scenario())
    assert out["was_empty"] and not out["empty_now"], out
    assert out["writing"], f"the writer was not held up: {out}"
    assert out["written"] < 1000, out  # the pipe and the transport's high-water mark: about 130 frames
    assert out["buffered"] <= out["high"] + len(encode_frame(frame)), out


@pytest.mark.parametrize("pace_s", [0, 0.0002], ids=["flood", "paced"])
@pytest.mark.parametrize("run", [asyncio.run, loops.run], ids=["asyncio", "uvloop"])
def test_a_cell_whose_worker_floods_calls_and_reads_no_reply_ends_at_its_deadline(run, pace_s, tmp_path, monkeypatch):
    """The whole path, from a cell down: its worker (the attacker's payload) sends a stream of tool
    calls and reads none of the replies.  The service answers what fits its pipe and its transport's
    high-water mark, then holds the rest up; it hands the calls to the tools a few per turn of the
    event loop, never a flood in one; and the cell ends at its own deadline with an error that says so."""
    plan = {"flood_calls": {"tool": "nop", "frames": 200_000, "pace_s": pace_s}}
    monkeypatch.setattr(supply, "start_worker", functools.partial(start_worker, test_payload=json.dumps(plan)))
    calls = 0

    async def nop(call_id: str, params: dict[str, object], ctx: object) -> object:
        nonlocal calls
        calls += 1
        # About 24 KiB a reply: the pipe and the transport fill within a handful of calls, long before the
        # cell's park time however loaded the machine (with 1 KiB replies a loaded machine parked first).
        return {"pad": "x" * REPLY_BYTES}

    tool = ToolSpec(name="nop", description="Counts its calls.", execute=nop, input_schema={"type": "object"})
    settings = Settings().replace(
        data_dir=str(tmp_path),
        workers=1,
        sandbox="off",  # confinement is not under test
        log_level="warning",
        max_calls_per_cell=100_000,  # the cap on calls would end the cell before the pipe fills
        kill_grace_ms=100,
    )

    async def scenario() -> dict[str, object]:
        svc = build_components(settings.check(), extra_tools=[tool])
        await svc.start()
        most_calls_in_a_turn = 0
        most_buffered = high = 0
        cell_done = False

        async def watch() -> None:
            # Once per turn of the loop: how many calls ran since the last turn, what the service holds.
            nonlocal most_calls_in_a_turn, most_buffered, high
            seen = calls
            while not cell_done:
                await asyncio.sleep(0)
                most_calls_in_a_turn = max(most_calls_in_a_turn, calls - seen)
                seen = calls
                for worker in svc.pool.workers():
                    transport = worker.proc.stdin.transport
                    most_buffered = max(most_buffered, transport.get_write_buffer_size())
                    high = transport.get_write_buffer_limits()[1]

        watcher = asyncio.ensure_future(watch())
        try:
            limits = svc.cells.limits(timeout_ms=1000, memory_limit_bytes=None, max_output_bytes=None)
            envelope = await svc.cells.exec(
                CellSpec(code="await nop({}); return 1", tenant=LOCAL_TENANT, limits=limits)
            )
        finally:
            cell_done = True
            await watcher
            await svc.close()
        return {
            "envelope": envelope,
            "calls": calls,
            "most_calls_in_a_turn": most_calls_in_a_turn,
            "most_buffered": most_buffered,
            "high": high,
        }

    out = run(scenario())
    envelope = out["envelope"]
    assert envelope["status"] == "failed" and envelope["code"] == "timeout", envelope
    # Replies filled the pipe, then the transport up to its high-water mark (and one settle frame over
    # it, at most), and the leg waited: far fewer calls ran than the worker sent.
    # At most one settle message over the mark: its frame and its reply payload.
    assert out["high"] <= out["most_buffered"] <= out["high"] + REPLY_BYTES + 2048, out
    assert out["calls"] < 1000, out
    assert out["most_calls_in_a_turn"] <= 4, out


FLOODS = {
    # Four million values (8 MB): ~300 MB of objects, were it parsed; refused for its size alone.
    "large": (4_000_000, f"over the {CONTROL_FRAME_BYTES}-byte cap"),
    # A hundred thousand (200 KB): small enough, too many values; refused by their count.
    "dense": (100_000, f"more than {CONTROL_FRAME_VALUES} JSON values"),
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
@pytest.mark.parametrize("run", [asyncio.run, loops.run], ids=["asyncio", "uvloop"])
def test_a_worker_flooding_frames_of_tiny_values_is_killed_before_one_is_decoded(run, flood, tmp_path, monkeypatch):
    """A worker (the attacker's payload) that writes frames of tiny values, for a runtime that does not
    exist, would make the service build objects at ~80 bytes a value on the event loop.  Its first frame
    is measured and counted on its bytes and refused: the worker is killed, and its own cell fails at
    once naming the cap, long before the cell's deadline."""
    values, why = FLOODS[flood]
    plan = {"flood_values": {"frames": 10, "values": values}}
    monkeypatch.setattr(supply, "start_worker", functools.partial(start_worker, test_payload=json.dumps(plan)))
    settings = Settings().replace(data_dir=str(tmp_path), workers=1, sandbox="off", log_level="warning")

    async def scenario() -> dict[str, object]:
        svc = build_components(settings.check())
        await svc.start()
        try:
            # Unguarded, the frames would be parsed, then ignored (no such runtime): the cell would time out.
            limits = svc.cells.limits(timeout_ms=5_000, memory_limit_bytes=None, max_output_bytes=None)
            return await svc.cells.exec(CellSpec(code="return 1", tenant=LOCAL_TENANT, limits=limits))
        finally:
            await svc.close()

    envelope = run(scenario())
    assert (envelope["status"], envelope["code"]) == ("failed", "runtime_unavailable"), envelope
    assert why in envelope["error"], envelope
