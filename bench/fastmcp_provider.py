"""FastMCP CodeMode's ``execute`` on its default sandbox against codemode's, in the same run, alternating.

``python -m bench fastmcp [--executes N] [--calls N] [--monty-dir DIR]``.  One FastMCP server
with a no-op tool behind FastMCP's ``CodeMode`` transform, called through FastMCP's in-memory ``Client``
(the whole ``execute`` tool call is timed: FastMCP's own work, the sandbox, each ``call_tool``), with:

* **default**: FastMCP's ``MontySandboxProvider`` (a local ``pydantic_monty.AsyncMonty`` pool per run, its
  worker an unconfined ``monty`` process).  It runs the stock pydantic-monty 1.4, kept apart from the
  service's environment, in a long-lived child process whose
  ``PYTHONPATH`` puts a ``pip install --target`` copy first (``--monty-dir``; made on first use when missing);
* **codemode**: ``CodemodeSandboxProvider`` against the real service (``python -m service.cli serve``, defaults,
  loopback), the code run as a Python cell in a confined worker and each call a client tool (a leg each).

The two sides take turns execute by execute (the order flipping each time), so the machine's drift hits
both alike; each figure is the median wall time of an ``execute`` (each side timing its own), for code with
no tool call and with ``--calls`` sequential calls.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .report import aligned

ROOT = Path(__file__).resolve().parents[1]
#: The newest pydantic-monty the index can install whole (1.5.0 names a pydantic-monty-client it lacks).
MONTY_RELEASE = "pydantic-monty==1.4.0"
DEFAULT_MONTY_DIR = ROOT / ".data" / "bench-pydantic-monty-1"
SIDES = ("default", "codemode")
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


class _Executor:
    """FastMCP's in-memory client calling ``execute`` on a server whose CodeMode uses ``provider``."""

    def __init__(self, provider: Any, calls: int) -> None:
        from fastmcp import Client

        self.provider = provider
        self.calls = calls
        self.client = Client(_server(provider))

    async def __aenter__(self) -> _Executor:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(None, None, None)
        close = getattr(self.provider, "aclose", None)  # codemode's: its client for this event loop
        if close is not None:
            await close()

    async def wall_ms(self, name: str) -> float:
        """One ``execute`` of the code ``name``, timed from the call to its answer."""
        t0 = time.perf_counter()
        result = await self.client.call_tool("execute", {"code": CODES[name].format(n=self.calls)})
        wall = (time.perf_counter() - t0) * 1000
        assert result.data == {"total": self.calls if name == "calls" else 1}, result
        return wall


async def _child(calls: int) -> None:
    """The default provider's side, in the process whose ``pydantic_monty`` is 1.x: for each code name read
    on stdin, one ``execute`` and its wall ms on stdout."""
    from fastmcp.experimental.transforms.code_mode import MontySandboxProvider

    async with _Executor(MontySandboxProvider(), calls) as executor:
        while name := (await asyncio.to_thread(sys.stdin.readline)).strip():
            print(await executor.wall_ms(name), flush=True)


def install_monty(path: Path = DEFAULT_MONTY_DIR) -> Path:
    """``path``, holding a ``pip install --target`` copy of ``MONTY_RELEASE`` (installed now when missing)."""
    if not (path / "pydantic_monty").is_dir():
        print(f"bench: installing {MONTY_RELEASE} into {path} (it cannot share the service venv)", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", str(path)]
        subprocess.run([*pip, MONTY_RELEASE], check=True)
    return path


async def _alternating(base: str, monty: Path, executes: int, calls: int) -> dict[str, dict[str, list[float]]]:
    """Wall ms per side and code, the two sides taking turns execute by execute (the order flipping each
    time), so the machine's drift hits both alike; two warm-up executes per side and code are not counted."""
    from codemode_client.fastmcp_sandbox import CodemodeSandboxProvider

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(monty), str(ROOT)]),
        "PATH": os.pathsep.join([str(monty / "bin"), os.environ.get("PATH", "")]),
    }
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.fastmcp_provider", "--child", "--calls", str(calls),
        env=env, cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    stdin, stdout = child.stdin, child.stdout

    async def default_ms(name: str) -> float:
        stdin.write(name.encode() + b"\n")
        await stdin.drain()
        line = await stdout.readline()
        if not line:
            raise RuntimeError(f"the default provider's process ended (exit {await child.wait()})")
        return float(line)

    walls: dict[str, dict[str, list[float]]] = {side: {name: [] for name in CODES} for side in SIDES}
    try:
        async with _Executor(CodemodeSandboxProvider(base), calls) as codemode:
            sides = {"default": default_ms, "codemode": codemode.wall_ms}
            for name in CODES:
                for i in range(executes + 2):
                    order = SIDES if i % 2 == 0 else SIDES[::-1]
                    for side in order:
                        wall = await sides[side](name)
                        if i >= 2:
                            walls[side][name].append(wall)
    finally:
        stdin.close()
        await child.wait()
    return walls


def run_fastmcp(executes: int = 100, calls: int = 5, monty_dir: Path = DEFAULT_MONTY_DIR) -> dict[str, Any]:
    from .servers import codemode_server

    monty = install_monty(monty_dir)
    with codemode_server() as svc:
        walls = asyncio.run(_alternating(svc.base, monty, executes, calls))
    medians = {side: {name: statistics.median(w) for name, w in by_code.items()} for side, by_code in walls.items()}
    loadavg = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    return {"median_ms": medians, "executes": executes, "calls": calls, "monty": MONTY_RELEASE, "loadavg": loadavg}


def render(r: dict[str, Any]) -> str:
    m = r["median_ms"]
    rows = [("execute (median wall ms)", "default (local Monty)", "codemode", "added")]
    for name in CODES:
        label = f"{r['calls']} sequential call_tool" if name == "calls" else "return 1, no tool call"
        d, c = m["default"][name], m["codemode"][name]
        rows.append((label, f"{d:.2f}", f"{c:.2f}", f"{c - d:+.2f}"))
    per_call = [(m[side]["calls"] - m[side]["no call"]) / r["calls"] for side in ("default", "codemode")]
    rows.append(("per call_tool", f"{per_call[0]:.2f}", f"{per_call[1]:.2f}", f"{per_call[1] - per_call[0]:+.2f}"))
    return "\n".join(aligned(rows)) + (
        f"\n({r['executes']} executes per code and side, taking turns; default: FastMCP's "
        f"MontySandboxProvider on {r['monty']}; codemode: CodemodeSandboxProvider over loopback HTTP; "
        f"load average {r['loadavg']})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench fastmcp", description=__doc__)
    p.add_argument("--executes", type=int, default=100, help="timed executes per code and side")
    p.add_argument("--calls", type=int, default=5, help="sequential call_tool calls in the second code")
    p.add_argument(
        "--monty-dir", type=Path, default=DEFAULT_MONTY_DIR, help="a pip --target copy of pydantic-monty 1.x"
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        asyncio.run(_child(args.calls))
        return 0
    print(render(run_fastmcp(args.executes, args.calls, args.monty_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
