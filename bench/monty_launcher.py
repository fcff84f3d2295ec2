"""A stock pydantic-monty 1.x pool with its own ``monty`` against the same pool through ``codemode-monty``.

``python -m bench monty_launcher [--checkouts N] [--monty-dir DIR]``.  The pool runs in a child process
whose ``PYTHONPATH`` puts a ``pip install --target`` copy of pydantic-monty 1.x first (it cannot share the
service's venv; see ``bench/fastmcp_provider.py``).  Two figures per binary, in the same run, the two
binaries taking turns checkout by checkout:

* **fresh worker**: each checkout gets a new worker (``max_checkouts_per_worker=1``, one process): a
  checkout waits for the replacement's start, so the figure is a worker start plus a trivial feed;
* **reused worker**: one worker serves every checkout (the pool's default reuse).

The launcher's cache of its seccomp filter is warm (one ``codemode-monty check`` first): a cold one adds
libseccomp's load and ``ldd`` once per user and binary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from .fastmcp_provider import DEFAULT_MONTY_DIR, MONTY_RELEASE, ROOT, install_monty
from .report import aligned

LAUNCHER = Path(sysconfig.get_path("scripts")) / "codemode-monty"
MODES = {"fresh worker": 1, "reused worker": None}


def confined_binary(monty: Path, into: Path) -> Path:
    """A ``codemode-monty`` link in ``into`` beside a ``monty`` link to ``monty``'s binary: the launcher
    finds the real binary beside the path it was started by."""
    (into / "monty").symlink_to(monty / "bin" / "monty")
    (into / "codemode-monty").symlink_to(LAUNCHER)
    return into / "codemode-monty"


def pool_child(monty: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m bench.monty_launcher --child ARGS`` with ``monty``'s pydantic_monty first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(monty), str(ROOT)])}
    command = [sys.executable, "-m", "bench.monty_launcher", "--child", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=True)


# ---- in the child (pydantic_monty is 1.x there) ------------------------------------------------


def _proc_fields(pid: int) -> dict[str, str]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    picked = {name: fields[name].split()[0] for name in ("Uid", "Gid", "NoNewPrivs", "Seccomp", "CapEff", "Threads")}
    picked["net"] = os.readlink(f"/proc/{pid}/ns/net")
    return picked


def _layers(binary: str) -> dict[str, Any]:
    """A host call, the memory and time limits, and the worker's /proc entries, through ``binary``."""
    import pydantic_monty

    out: dict[str, Any] = {"monty": pydantic_monty.__version__, "net_parent": os.readlink("/proc/self/ns/net")}
    with pydantic_monty.Monty(binary_path=binary, min_processes=1, max_processes=1) as pool:
        with pool.checkout() as session:
            out["host_call"] = session.feed_run("add(2, 3) * 7", external_lookup={"add": lambda a, b: a + b})
            pid = session.worker_pid
            assert pid is not None
            out["worker"] = _proc_fields(pid)
        for name, limits, code in (
            ("memory", {"max_memory": 50_000_000}, "x = 'x' * 10**9"),
            ("time", {"max_feed_duration_secs": 0.3}, "while True:\n    pass"),
        ):
            with pool.checkout(limits=limits) as session:
                try:
                    session.feed_run(code)
                    out[name] = "no error"
                except pydantic_monty.MontyError as exc:
                    out[name] = f"{type(exc).__name__}: {exc}"
    return out


def _timings(binaries: dict[str, str], checkouts: int) -> dict[str, dict[str, list[float]]]:
    import pydantic_monty

    walls: dict[str, dict[str, list[float]]] = {mode: {name: [] for name in binaries} for mode in MODES}
    for mode, per_worker in MODES.items():
        pools = {
            name: pydantic_monty.Monty(
                binary_path=path, min_processes=1, max_processes=1, max_checkouts_per_worker=per_worker
            )
            for name, path in binaries.items()
        }
        for pool in pools.values():
            pool.__enter__()
        try:
            order = list(binaries)
            for i in range(checkouts + 1):  # the first round warms both pools up and is not counted
                for name in order if i % 2 else reversed(order):
                    start = time.perf_counter()
                    with pools[name].checkout() as session:
                        session.feed_run("1 + 1")
                    if i:
                        walls[mode][name].append((time.perf_counter() - start) * 1000)
        finally:
            for pool in pools.values():
                pool.__exit__(None, None, None)
    return walls


# ---- in the bench process ----------------------------------------------------------------------


def run_monty_launcher(checkouts: int = 60, monty_dir: Path = DEFAULT_MONTY_DIR) -> dict[str, Any]:
    monty = install_monty(monty_dir)
    with tempfile.TemporaryDirectory(prefix="bench-monty-launcher-") as tmp:
        launcher = confined_binary(monty, Path(tmp))
        subprocess.run([str(launcher), "check"], env={}, capture_output=True, check=True)  # warm its cache
        binaries = {"stock": str(monty / "bin" / "monty"), "codemode-monty": str(launcher)}
        child = pool_child(monty, "timings", json.dumps(binaries), str(checkouts))
    walls = json.loads(child.stdout)
    medians = {mode: {name: statistics.median(w) for name, w in by.items()} for mode, by in walls.items()}
    loadavg = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    bare = _bare_python_ms(checkouts)
    return {
        "median_ms": medians,
        "bare_python_ms": bare,
        "checkouts": checkouts,
        "monty": MONTY_RELEASE,
        "loadavg": loadavg,
    }


def _bare_python_ms(runs: int) -> float:
    """A bare interpreter start, the bulk of what the launcher adds to a fresh worker."""
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
        walls.append((time.perf_counter() - start) * 1000)
    return statistics.median(walls)


def render(r: dict[str, Any]) -> str:
    rows = [("checkout + feed '1 + 1' (median ms)", "stock monty", "codemode-monty", "added")]
    for mode, by in r["median_ms"].items():
        stock, confined = by["stock"], by["codemode-monty"]
        rows.append((mode, f"{stock:.2f}", f"{confined:.2f}", f"{confined - stock:+.2f}"))
    return "\n".join(aligned(rows)) + (
        f"\n({r['checkouts']} checkouts per row and binary, taking turns; {r['monty']}'s pool, one process; "
        f"a bare `python -I -c pass`, the bulk of a fresh worker's added time: {r['bare_python_ms']:.2f} ms; "
        f"load average {r['loadavg']})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench monty_launcher", description=__doc__)
    p.add_argument("--checkouts", type=int, default=60, help="timed checkouts per row and binary")
    p.add_argument(
        "--monty-dir", type=Path, default=DEFAULT_MONTY_DIR, help="a pip --target copy of pydantic-monty 1.x"
    )
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        result = _layers(rest[0]) if kind == "layers" else _timings(json.loads(rest[0]), int(rest[1]))
        print(json.dumps(result))
        return 0
    print(render(run_monty_launcher(args.checkouts, args.monty_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
