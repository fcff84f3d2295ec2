"""A worker that stops reading its pipe (a stand-in for one an attacker owns): what the service writes
waits in the transport, ``Worker.pipe_empty`` says so, and a writer that ``drain``s after each write,
as a cell's leg does, stops once the transport holds its high-water mark.  A leg answers in place only
into an empty pipe and otherwise writes and drains (``service/cells/cell.py``), so such a worker holds
up its own leg, never more of the service's memory than that."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from bench import loops
from bridge.framing import encode_frame
from bridge.messages import drop_frame
from service.errors import WorkerGone
from service.workers.worker_process import start_worker

CAP = 1 << 20


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
