"""The driver side of ``python -m bench peers`` for Python peers: the protocol of ``harness.mjs``.

One JSON request a line on stdin, one JSON answer a line on stdout (``runs``: the wall ms of each of
``n`` sequential runs; ``concurrent``: how many runs ``concurrency`` lanes finished in ``seconds``).
Each run's value must summarise to ``expect`` (a number, or a list's length) or the request fails.
Its drivers run as ``python -m bench.peer_drivers.NAME`` with the peer's ``pip install --target``
directory first on ``PYTHONPATH``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

Run = Callable[[str], Awaitable[Any]]


def _summary(value: Any) -> Any:
    return len(value) if isinstance(value, list) else value


async def _checked(run: Run, code: str, expect: Any) -> None:
    value = await run(code)
    if _summary(value) != expect:
        raise AssertionError(f"expected {expect}, got {repr(value)[:200]}")


async def _handle(run: Run, req: dict[str, Any]) -> dict[str, Any]:
    if req["op"] == "runs":
        wall = []
        for _ in range(req["n"]):
            start = time.perf_counter()
            await _checked(run, req["code"], req["expect"])
            wall.append((time.perf_counter() - start) * 1000)
        return {"wall_ms": wall}
    if req["op"] == "concurrent":
        start = time.perf_counter()
        deadline = start + req["seconds"]
        runs = 0

        async def lane() -> None:
            nonlocal runs
            while time.perf_counter() < deadline:
                await _checked(run, req["code"], req["expect"])
                runs += 1

        await asyncio.gather(*(lane() for _ in range(req["concurrency"])))
        return {"runs": runs, "seconds": time.perf_counter() - start}
    raise ValueError(f"unknown op {req['op']}")


async def serve(versions: dict[str, str], run: Run) -> None:
    """Answer requests until stdin closes; ``run(code)`` runs one piece of guest code in a fresh guest."""

    def write(obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    write({"ready": True, "versions": {"python": sys.version.split()[0], **versions}})
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        if not line.strip():
            continue
        try:
            write(await _handle(run, json.loads(line)))
        except Exception as exc:  # noqa: BLE001 - any failure is the answer, the bench decides
            write({"error": f"{type(exc).__name__}: {exc}", "stack": traceback.format_exc()})
