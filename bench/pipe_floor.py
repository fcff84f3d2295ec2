"""The floor of a nested call in this design: one small frame each way between two Python processes.

A tool call from a cell is, at the bottom, the worker writing a request frame to its pipe and the
service writing a reply frame back. This figure measures exactly that and nothing else — the same
length-prefixed framing (``bridge.framing``), the same pipes the worker pool uses (the child's stdin
a subprocess pipe, its stdout read by ``WorkerOutput``), in the caller's event loop — so the call
figures can be printed as a multiple of it, measured in the same run on the same machine under the
same load.

The echo process is a plain Python child: it reads a frame, decodes it, and writes a small reply
frame (``{"t": "ack", "id": .., "ok": true}``), which is about what a worker does with a no-op tool's answer.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bridge.framing import DEFAULT_FRAME_CAP, encode_frame
from service.runtime.workers.pipe import WorkerOutput

# The child imports only bridge.framing (orjson underneath), like the worker's frame loop.
_ECHO_CHILD = """
import sys
from bridge.framing import HEADER_SIZE, decode_body, encode_frame, frame_length
read, out = sys.stdin.buffer.read, sys.stdout.buffer
while True:
    header = read(HEADER_SIZE)
    if len(header) < HEADER_SIZE:
        break
    message = decode_body(read(frame_length(header)))
    out.write(encode_frame({"t": "ack", "id": message["id"], "ok": True}))
    out.flush()
"""


async def measure_pipe_floor(
    n: int = 2000, rounds: int = 3, place: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Median over ``rounds`` of the sequential round trip (wall µs) and the parent's CPU µs per trip.

    ``place`` is given the echo child's pid before the first trip (``bench/placement.py`` pins it).
    """
    stdout_read, stdout_write = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ECHO_CHILD, stdin=asyncio.subprocess.PIPE, stdout=stdout_write
        )
    finally:
        os.close(stdout_write)
    output = await WorkerOutput.attach(stdout_read, DEFAULT_FRAME_CAP)  # read as the pool reads a worker
    assert proc.stdin is not None
    if place is not None:
        place(proc.pid)
    writer = proc.stdin
    walls: list[float] = []
    cpus: list[float] = []
    try:

        async def trip(i: int) -> None:
            writer.write(encode_frame({"op": "call", "id": i, "tool": "nop", "args": {"i": i}}))
            await output.next()

        for i in range(200):  # warm the child's imports and both sides' buffers
            await trip(i)
        for _ in range(rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            for i in range(n):
                await trip(i)
            walls.append((time.perf_counter() - t0) * 1e6 / n)
            cpus.append((time.process_time() - c0) * 1e6 / n)
    finally:
        writer.close()
        await proc.wait()
        output.close()
    return {"round_trip_us": statistics.median(walls), "parent_cpu_us": statistics.median(cpus), "trips": n}
