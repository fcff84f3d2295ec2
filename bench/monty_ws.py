"""pydantic-ai CodeMode's ``run_code`` on harness's default local Monty pool against codemode's ``/v1/monty``.

``python -m bench monty_ws [--runs N] [--calls N]``.  One pydantic-ai agent run per sample, its model a
``FunctionModel`` that calls ``run_code`` once (code with ``--calls`` sequential tool calls) and then
answers; the whole ``agent.run`` is timed.  Two sides, taking turns run by run (the order flipping each
time), in the same process and run:

* **default**: ``CodeMode()``: harness's own local ``AsyncMonty`` pool, a stock unconfined ``monty`` worker;
* **codemode**: ``CodeMode(monty_sandbox=...)`` dialing ``/v1/monty`` of the real service (defaults,
  loopback): a new WebSocket connection per run, and behind it a new ``monty subprocess`` confined by
  ``codemode-monty`` (its seccomp plan cached after the first), each frame checked both ways.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from .fastmcp_provider import MONTY_RELEASE
from .report import aligned

SIDES = ("default", "codemode")


def _agent(sandbox: Any, calls: int) -> Any:
    import pydantic_monty
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai_harness import CodeMode

    code = f"total = 0\nfor i in range({calls}):\n    total += await nop(i=i)\ntotal"

    def model(messages: list[Any], info: Any) -> Any:
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", [])):
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": code})])
        return ModelResponse(parts=[TextPart("done")])

    def nop(i: int) -> int:
        """Answer 1."""
        return 1

    factory = None if sandbox is None else (lambda: pydantic_monty.AsyncMontyWebsocket(sandbox))
    return Agent(FunctionModel(model), tools=[nop], capabilities=[CodeMode(monty_sandbox=factory)])


async def _alternating(url: str, runs: int, calls: int) -> dict[str, list[float]]:
    agents = {"default": _agent(None, calls), "codemode": _agent(url, calls)}
    walls: dict[str, list[float]] = {side: [] for side in SIDES}
    for i in range(runs + 1):  # the first round warms both sides up and is not counted
        for side in SIDES if i % 2 else tuple(reversed(SIDES)):
            start = time.perf_counter()
            await agents[side].run("go")
            if i:
                walls[side].append((time.perf_counter() - start) * 1000)
    return walls


def run_monty_ws(runs: int = 40, calls: int = 5) -> dict[str, Any]:
    from .servers import codemode_server

    with codemode_server() as svc:
        url = svc.base.replace("http://", "ws://", 1) + "/v1/monty"
        walls = asyncio.run(_alternating(url, runs, calls))
    loadavg = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    medians = {side: statistics.median(w) for side, w in walls.items()}
    return {"median_ms": medians, "runs": runs, "calls": calls, "monty": MONTY_RELEASE, "loadavg": loadavg}


def render(r: dict[str, Any]) -> str:
    m = r["median_ms"]
    rows = [("agent run with one run_code (median wall ms)", "default (local pool)", "codemode /v1/monty", "added")]
    rows.append(
        (
            f"{r['calls']} sequential tool calls",
            f"{m['default']:.2f}",
            f"{m['codemode']:.2f}",
            f"{m['codemode'] - m['default']:+.2f}",
        )
    )
    return "\n".join(aligned(rows)) + (
        f"\n({r['runs']} runs per side, taking turns; {r['monty']}; codemode: a new connection and confined "
        f"worker per run over loopback; load average {r['loadavg']})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench monty_ws", description=__doc__)
    p.add_argument("--runs", type=int, default=40, help="timed agent runs per side")
    p.add_argument("--calls", type=int, default=5, help="sequential tool calls in the code")
    args = p.parse_args(argv)
    print(render(run_monty_ws(args.runs, args.calls)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
