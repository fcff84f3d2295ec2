"""FastMCP CodeMode's ``execute`` on its default sandbox against codemode's, in the same run, alternating.

``python -m bench fastmcp [--rounds N] [--executes N] [--calls N] [--monty-dir DIR]``.  One FastMCP server
with a no-op tool behind FastMCP's ``CodeMode`` transform, called through FastMCP's in-memory ``Client``
(the whole ``execute`` tool call is timed: FastMCP's own work, the sandbox, each ``call_tool``), with:

* **default**: FastMCP's ``MontySandboxProvider`` (a local ``pydantic_monty.AsyncMonty`` pool per run, its
  worker an unconfined ``monty`` process).  It needs pydantic-monty 1.x, which cannot share the venv with
  the service's pinned 0.0.18 (one import name), so it runs in a child process whose ``PYTHONPATH`` puts a
  ``pip install --target`` copy first (``--monty-dir``; made on first use when missing);
* **codemode**: ``CodemodeSandboxProvider`` against the real service (``python -m service.cli serve``, defaults,
  loopback), the code run as a Python cell in a confined worker and each call a client tool (a leg each).

Rounds alternate the two sides so the machine's drift hits both alike; each figure is the median wall
time of an ``execute`` over every round, for code with no tool call and with ``--calls`` sequential calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The newest pydantic-monty the index can install whole (1.5.0 names a pydantic-monty-client it lacks).
MONTY_RELEASE = "pydantic-monty==1.4.0"
DEFAULT_MONTY_DIR = ROOT / ".data" / "bench-pydantic-monty-1"
CODES = {
    "no call": 'return {{"total": 1}}',
    "calls": 'total = 0\nfor i in range({n}):\n    total += (await call_tool("nop", {{"i": i}}))["result"]\nreturn {{"total": total}}',
}


def _server(provider: Any) -> Any:
    from fastmcp import FastMCP
    from fastmcp.experimental.transforms.code_mode import CodeMode

    mcp = FastMCP("bench")

    @mcp.tool
    def nop(i: int) -> int:
        """Answer 1."""
        return 1

    mcp.add_transform(CodeMode(sandbox_provider=provider))
    return mcp


async def _times(provider: Any, executes: int, calls: int) -> dict[str, list[float]]:
    """Wall ms of each ``execute`` per code (two warm-up executes of each first, not counted)."""
    from fastmcp import Client

    out: dict[str, list[float]] = {name: [] for name in CODES}
    async with Client(_server(provider)) as client:
        for name, code in CODES.items():
            source = code.format(n=calls)
            want = calls if name == "calls" else 1
            for i in range(executes + 2):
                t0 = time.perf_counter()
                result = await client.call_tool("execute", {"code": source})
                wall = (time.perf_counter() - t0) * 1000
                assert result.data == {"total": want}, result
                if i >= 2:
                    out[name].append(wall)
    close = getattr(provider, "aclose", None)  # codemode's: its client for this event loop
    if close is not None:
        await close()
    return out


def _child(executes: int, calls: int) -> None:
    """The default provider's round, in the process whose ``pydantic_monty`` is 1.x: its times as JSON."""
    from fastmcp.experimental.transforms.code_mode import MontySandboxProvider

    print(json.dumps(asyncio.run(_times(MontySandboxProvider(), executes, calls))))


def _monty_dir(path: Path) -> Path:
    if not (path / "pydantic_monty").is_dir():
        print(f"bench fastmcp: installing {MONTY_RELEASE} into {path} (FastMCP's default sandbox)", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--target",
                str(path),
                MONTY_RELEASE,
            ],
            check=True,
        )
    return path


def _default_round(monty: Path, executes: int, calls: int) -> dict[str, list[float]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(monty), str(ROOT)]),
        "PATH": os.pathsep.join([str(monty / "bin"), os.environ.get("PATH", "")]),
    }
    argv = [
        sys.executable,
        "-m",
        "bench.fastmcp_provider",
        "--child",
        "--executes",
        str(executes),
        "--calls",
        str(calls),
    ]
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the default provider's round failed: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run_fastmcp(
    rounds: int = 4, executes: int = 25, calls: int = 5, monty_dir: Path = DEFAULT_MONTY_DIR
) -> dict[str, Any]:
    from codemode_client.fastmcp_sandbox import CodemodeSandboxProvider

    from .servers import codemode_server

    monty = _monty_dir(monty_dir)
    walls: dict[str, dict[str, list[float]]] = {side: {name: [] for name in CODES} for side in ("default", "codemode")}
    with codemode_server() as svc:
        provider = CodemodeSandboxProvider(svc.base)
        for _ in range(rounds):
            for name, times in _default_round(monty, executes, calls).items():
                walls["default"][name] += times
            for name, times in asyncio.run(_times(provider, executes, calls)).items():
                walls["codemode"][name] += times
    medians = {side: {name: statistics.median(w) for name, w in by_code.items()} for side, by_code in walls.items()}
    loadavg = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    return {
        "median_ms": medians,
        "rounds": rounds,
        "executes": executes,
        "calls": calls,
        "monty": MONTY_RELEASE,
        "loadavg": loadavg,
    }


def render(r: dict[str, Any]) -> str:
    m = r["median_ms"]
    rows = [("execute (median wall ms)", "default (local Monty)", "codemode", "added")]
    for name in CODES:
        label = f"{r['calls']} sequential call_tool" if name == "calls" else "return 1, no tool call"
        d, c = m["default"][name], m["codemode"][name]
        rows.append((label, f"{d:.2f}", f"{c:.2f}", f"{c - d:+.2f}"))
    per_call = [(m[side]["calls"] - m[side]["no call"]) / r["calls"] for side in ("default", "codemode")]
    rows.append(("per call_tool", f"{per_call[0]:.2f}", f"{per_call[1]:.2f}", f"{per_call[1] - per_call[0]:+.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines) + (
        f"\n({r['rounds']} alternating rounds of {r['executes']} executes per code and side; default: FastMCP's "
        f"MontySandboxProvider on {r['monty']}; codemode: CodemodeSandboxProvider over loopback HTTP; "
        f"load average {r['loadavg']})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench fastmcp", description=__doc__)
    p.add_argument("--rounds", type=int, default=4, help="alternating rounds (one per side each)")
    p.add_argument("--executes", type=int, default=25, help="timed executes per code, side and round")
    p.add_argument("--calls", type=int, default=5, help="sequential call_tool calls in the second code")
    p.add_argument(
        "--monty-dir", type=Path, default=DEFAULT_MONTY_DIR, help="a pip --target copy of pydantic-monty 1.x"
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.executes, args.calls)
        return 0
    print(render(run_fastmcp(args.rounds, args.executes, args.calls, args.monty_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
