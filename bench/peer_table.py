"""``python -m bench peers``: codemode beside its peers, each through its own public API, in one run.

Columns: codemode JavaScript and Python cells through HTTP (``codemode serve`` under uvicorn on a
loopback socket, its defaults otherwise: 4 workers under the kernel sandbox, a plugin ``nop`` tool) and
the peers the project's performance work is judged against — Vercel ``run``, ``@ai-sdk/code-mode``, isolated-vm and quickjs-rs against codemode
JS, the stock pydantic-monty 1.x pool against codemode Python — installed on demand into a cache
(``bench/peer_install.py``; never in CI).  Every column is a driver process (``bench/peer_drivers/``)
fed the same code (``bench/peer_workloads.py``) over one protocol; the bench times nothing itself.

Rounds alternate: each round runs every column once, its starting column rotating, so the machine's
drift falls on all of them; a peer's ratio to codemode is taken within each round.  CPU is read from
/proc around each phase: the driver's process tree for a peer (everything it needs to run code), the
service's tree (uvicorn and its workers, not the HTTP client) for codemode.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

from .fastmcp_provider import DEFAULT_MONTY_DIR
from .machine_costs import cpuidle
from .peer_install import (
    DEFAULT_CACHE,
    NPM_PEERS,
    PYPI_PEERS,
    Peer,
    PeerUnavailable,
    install_monty_pool,
    install_npm,
    install_pypi,
)
from .peer_report import Column, machine_lines, markdown_table, spread_lines, summarise
from .peer_workloads import workloads
from .servers import Server, descendants, tree_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
DRIVERS = Path(__file__).resolve().parent / "peer_drivers"
COLUMNS = (
    Column("codemode-js", "codemode JS", "javascript", "nop"),
    Column("vercel-run", "Vercel `run` 2.1", "javascript", "tools.nop", "codemode-js"),
    Column("ai-sdk-code-mode", "`@ai-sdk/code-mode`", "javascript", "tools.nop", "codemode-js"),
    Column("isolated-vm", "isolated-vm 5", "javascript", "nop", "codemode-js"),
    Column("quickjs-rs", "quickjs-rs 0.2", "javascript", "nop", "codemode-js"),
    Column("codemode-py", "codemode Py", "python", "nop"),
    Column("monty-pool", "pydantic-monty 1.4 pool", "python", "nop", "codemode-py"),
)
NODE_SCRIPTS = {
    "vercel-run": "vercel_run.mjs",
    "ai-sdk-code-mode": "ai_sdk_code_mode.mjs",
    "isolated-vm": "isolated_vm.mjs",
}
#: The service's limits raised only where the workloads need it (1,000 calls in one cell, all in flight).
SERVICE_ENV = {"CODEMODE_MAX_CALLS_PER_CELL": "10000", "CODEMODE_MAX_PENDING_REQUESTS": "1024"}
PLUGIN_TOML = '[tools]\nplugins = ["bench.peer_tools"]\n'
#: Where ``--write-docs`` puts the table: between these two lines in each file.
DOC_FILES = ("README.md", "docs/operations/benchmarks.md")
BEGIN, END = "<!-- python -m bench peers: begin -->", "<!-- python -m bench peers: end -->"
ANSWER_TIMEOUT_S = 600.0


class DriverFailed(Exception):
    pass


def _threads_cpu_ns(pids: list[int]) -> int:
    """Time on a CPU of every live thread of ``pids``, in ns (``schedstat``: exact, unlike stat's ticks)."""
    total = 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


class CpuMeter:
    """CPU seconds of a process tree between two readings.  Exact per-thread counters where every thread
    lived through the phase; where one ended (a recycled worker, a retired thread) its time is only in
    the 10 ms ticks of ``stat``, so a tick count clearly above the exact one wins."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def read(self) -> tuple[int, float]:
        return _threads_cpu_ns([self.pid, *descendants(self.pid)]), tree_cpu_seconds(self.pid)

    @staticmethod
    def seconds(before: tuple[int, float], after: tuple[int, float]) -> float:
        exact = max(0, after[0] - before[0]) / 1e9
        ticks = after[1] - before[1]
        return ticks if ticks > exact + 0.05 else exact


class Driver:
    """One column's driver process, speaking ``harness.mjs``'s JSON-line protocol."""

    def __init__(self, title: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.title = title
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - kept for the driver's life, read on failure
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, **(env or {})},
            cwd=DRIVERS if argv[0] == "node" else ROOT,
            text=True,
        )
        self.meter = CpuMeter(self.proc.pid)
        ready = self._answer(120.0)
        self.versions: dict[str, str] = ready.get("versions", {})

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        out: IO[str] = self.proc.stdout  # type: ignore[assignment]
        if not select.select([out], [], [], timeout_s)[0]:
            raise DriverFailed(f"{self.title}: no answer in {timeout_s:.0f} s")
        line = out.readline()
        if not line:
            self.stderr.seek(0)
            tail = self.stderr.read().decode(errors="replace").strip().splitlines()[-8:]
            raise DriverFailed(f"{self.title}: driver exited ({self.proc.poll()}): {' | '.join(tail)}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise DriverFailed(f"{self.title}: {answer['error'].strip()[:500]}")
        return answer

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
        stdin.write(json.dumps(req) + "\n")
        stdin.flush()
        return self._answer(ANSWER_TIMEOUT_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


def measure(
    driver: Driver, col: Column, opts: argparse.Namespace, service: CpuMeter | None, *, warm: bool = False
) -> dict[str, float]:
    """One round of one column: every figure of the table, and CPU alongside.  ``service``: codemode's
    service tree, whose CPU is the column's (the driver is then only its HTTP client)."""
    wl = workloads(opts.calls)
    runs = 2 if warm else opts.runs
    big_runs = 1 if warm else opts.big_runs
    meters = [service, driver.meter] if service else [driver.meter]

    def op(req: dict[str, Any]) -> tuple[dict[str, Any], list[float]]:
        before = [m.read() for m in meters]
        answer = driver.request(req)
        return answer, [CpuMeter.seconds(b, m.read()) for b, m in zip(before, meters, strict=True)]

    def runs_of(key: str, n: int) -> tuple[list[float], list[float]]:
        w = wl[key]
        answer, cpu = op({"op": "runs", "code": w.code(col.dialect, col.call), "n": n, "expect": w.expect})
        return answer["wall_ms"], cpu

    fig: dict[str, float] = {}
    fig["fresh_ms"] = statistics.median(runs_of("fresh", runs)[0])
    fig["one_call_ms"] = statistics.median(runs_of("one_call", runs)[0])
    wall, cpu = runs_of("seq_calls", 1)
    fig["seq_call_us"] = wall[0] * 1000 / opts.calls
    fig["cpu_us_per_seq_call"] = cpu[0] * 1e6 / opts.calls
    fig["par_call_us"] = runs_of("par_calls", 1)[0][0] * 1000 / opts.calls
    fig["big_ms"] = statistics.median(runs_of("big", big_runs)[0])
    fresh = wl["fresh"]
    answer, cpu = op(
        {
            "op": "concurrent",
            "code": fresh.code(col.dialect, col.call),
            "concurrency": opts.concurrency,
            "seconds": 0.5 if warm else opts.seconds,
            "expect": fresh.expect,
        }
    )
    fig["runs_per_s"] = answer["runs"] / answer["seconds"]
    fig["cpu_ms_per_run"] = cpu[0] * 1000 / max(answer["runs"], 1)
    if service:  # the HTTP client's share, kept apart from the service's
        fig["client_cpu_ms_per_run"] = cpu[1] * 1000 / max(answer["runs"], 1)
    return fig


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    node = shutil.which("node")
    return {
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "model": model,
        "governor": governor.read_text().strip() if governor.exists() else "not exposed",
        "cpuidle": cpuidle(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "node": subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() if node else "none",
    }


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@contextmanager
def codemode_service() -> Iterator[Server]:
    """``codemode serve`` with the ``nop`` plugin, on a loopback port, its sandbox left at ``auto``."""
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        config = Path(tmp) / "codemode.toml"
        config.write_text(PLUGIN_TOML)
        argv = ["-m", "service.cli", "serve", "--log-level", "warning", "--config", str(config)]
        with Server("codemode", argv, env=SERVICE_ENV) as server:
            yield server


def _start_drivers(stack: ExitStack, opts: argparse.Namespace, base: str, missing: dict[str, str]) -> dict[str, Driver]:
    """Install and start every column's driver; a column that cannot be had goes into ``missing``."""
    python = sys.executable
    drivers: dict[str, Driver] = {}
    for col in COLUMNS:
        if opts.only and col.key not in opts.only:
            continue
        try:
            if col.key.startswith("codemode-"):
                argv = ["node", "codemode_http.mjs", base, col.dialect]
                env: dict[str, str] = {}
            elif col.key in NPM_PEERS:
                peer = install_npm(col.key, opts.cache)
                argv, env = ["node", NODE_SCRIPTS[col.key], str(peer.path)], {}
            elif col.key in PYPI_PEERS:
                peer = install_pypi(col.key, opts.cache)
                argv, env = [python, "-m", "bench.peer_drivers.quickjs_rs_peer"], _python_env(peer)
            else:
                peer = install_monty_pool(opts.monty_dir)
                env = {**_python_env(peer), "PATH": f"{peer.path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
                argv = [python, "-m", "bench.peer_drivers.monty_pool"]
            if shutil.which(argv[0]) is None:
                raise PeerUnavailable(f"{argv[0]} is not on PATH")
            drivers[col.key] = stack.enter_context(_driver(col.title, argv, env))
        except (PeerUnavailable, DriverFailed) as exc:
            missing[col.title] = str(exc)
            print(f"bench peers: {col.title} not measured: {exc}", flush=True)
    return drivers


def _python_env(peer: Peer) -> dict[str, str]:
    """The peer's ``pip install --target`` copy first (before the venv's own), then this tree (the driver)."""
    return {"PYTHONPATH": os.pathsep.join([str(peer.path), str(ROOT)])}


@contextmanager
def _driver(title: str, argv: list[str], env: dict[str, str]) -> Iterator[Driver]:
    driver = Driver(title, argv, env)
    try:
        yield driver
    finally:
        driver.close()


def run_rounds(opts: argparse.Namespace) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "command": "python -m bench peers" + (f" {' '.join(opts.argv)}" if opts.argv else ""),
        "machine": machine(),
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rounds": opts.rounds,
        "missing": {},
        "versions": {},
    }
    rounds: list[dict[str, dict[str, float]]] = []
    with ExitStack() as stack:
        server = stack.enter_context(codemode_service())
        meta["sandbox"] = httpx.get(server.base + "/readyz", timeout=10).json().get("sandbox")
        drivers = _start_drivers(stack, opts, server.base, meta["missing"])
        for driver in drivers.values():
            meta["versions"].update({k: v for k, v in driver.versions.items() if k not in ("node", "python")})
        service = CpuMeter(server.proc.pid)
        order = [c for c in COLUMNS if c.key in drivers]
        print(f"bench peers: warming up {len(order)} columns", flush=True)
        for col in order:
            _measure_or_drop(drivers, col, opts, service, meta["missing"], warm=True)
        meta["load_before"] = loadavg()
        for r in range(opts.rounds):
            start = r % max(len(order), 1)
            this: dict[str, dict[str, float]] = {}
            for col in order[start:] + order[:start]:
                if col.key in drivers:
                    fig = _measure_or_drop(drivers, col, opts, service, meta["missing"])
                    if fig is not None:
                        this[col.key] = fig
            rounds.append(this)
            print(f"bench peers: round {r + 1}/{opts.rounds} done (load {loadavg()})", flush=True)
        meta["load_after"] = loadavg()
    return {"meta": meta, "rounds": rounds}


def _measure_or_drop(
    drivers: dict[str, Driver],
    col: Column,
    opts: argparse.Namespace,
    service: CpuMeter,
    missing: dict[str, str],
    *,
    warm: bool = False,
) -> dict[str, float] | None:
    """A column's figures; a driver that fails is dropped from the rest of the run, its reason kept."""
    try:
        return measure(drivers[col.key], col, opts, service if col.key.startswith("codemode-") else None, warm=warm)
    except DriverFailed as exc:
        missing[col.title] = f"failed: {exc}"
        print(f"bench peers: {col.title} dropped: {exc}", flush=True)
        del drivers[col.key]
        return None


def report(result: dict[str, Any]) -> str:
    meta, rounds = result["meta"], result["rounds"]
    summary = summarise(rounds, COLUMNS)
    present = tuple(c for c in COLUMNS if any(c.key in r for r in rounds))
    lines = [
        *machine_lines(meta),
        "",
        "Medians over rounds; (peer ÷ codemode in the same round, median): for times below 1 means the "
        "peer is faster, for runs/s above 1.",
        "",
        markdown_table(summary, present),
        "",
        "Spread over rounds, median (min–max):",
        *spread_lines(summary, present),
    ]
    return "\n".join(lines)


def docs_block(result: dict[str, Any]) -> str:
    """What ``--write-docs`` puts between the markers: the table, then the command, machine and load."""
    meta = result["meta"]
    summary = summarise(result["rounds"], COLUMNS)
    present = tuple(c for c in COLUMNS if any(c.key in r for r in result["rounds"]))
    facts = machine_lines(meta)
    return "\n".join(
        [
            BEGIN,
            markdown_table(summary, present),
            "",
            "Medians over rounds; in brackets peer ÷ codemode, the median of the ratios taken within each round "
            "(times: below 1 means the peer is faster; runs/s: above 1). " + facts[0][0].upper() + facts[0][1:] + ".",
            "",
            *(f"- {line}" for line in facts[1:]),
            END,
        ]
    )


def write_docs(result: dict[str, Any], root: Path = ROOT) -> list[Path]:
    """Replace the block between the markers in each of ``DOC_FILES`` (a file without them is skipped)."""
    block = docs_block(result)
    written = []
    for name in DOC_FILES:
        path = root / name
        text = path.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            path.write_text(head + block + rest.split(END, 1)[1])
            written.append(path)
    return written


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench peers", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5; 10 for a figure to publish)")
    p.add_argument("--calls", type=int, default=1000, help="host calls in the call workloads (default 1,000)")
    p.add_argument("--runs", type=int, default=20, help="runs per round of the fresh and one-call figures")
    p.add_argument("--big-runs", type=int, default=3, help="runs per round of the 1 MiB value")
    p.add_argument("--seconds", type=float, default=2.0, help="length of the concurrent phase per round")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument(
        "--only", type=lambda s: s.split(","), help="column keys, comma-separated: " + ", ".join(c.key for c in COLUMNS)
    )
    p.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="where peers are installed (default .data/bench-peers)"
    )
    p.add_argument(
        "--monty-dir", type=Path, default=DEFAULT_MONTY_DIR, help="a pip --target copy of pydantic-monty 1.x"
    )
    p.add_argument("--out", type=Path, default=DEFAULT_CACHE / "results.json", help="the run's rounds as JSON")
    p.add_argument("--from-json", type=Path, help="print (and --write-docs) a saved run instead of running")
    p.add_argument("--write-docs", action="store_true", help="put the table in README.md and the benchmarks page")
    return p


#: Options that say where files are, not what was measured: left out of the command the docs print.
PATH_OPTIONS = ("--out", "--monty-dir", "--cache", "--from-json")


def shown_argv(argv: list[str]) -> list[str]:
    """``argv`` as the docs print it: what was measured, without local paths or ``--write-docs``."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in PATH_OPTIONS:
            skip = True
        elif arg != "--write-docs" and not arg.startswith(tuple(f"{o}=" for o in PATH_OPTIONS)):
            shown.append(arg)
    return shown


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = _parser().parse_args(argv)
    opts.argv = shown_argv(argv)
    if opts.from_json:
        result = json.loads(opts.from_json.read_text())
    else:
        started = time.perf_counter()
        result = run_rounds(opts)
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(json.dumps(result, indent=1))
        print(f"bench peers: {time.perf_counter() - started:.0f} s; rounds written to {opts.out}")
    print(report(result))
    if opts.write_docs:
        for path in write_docs(result):
            print(f"bench peers: table written into {path}")
    return 0
