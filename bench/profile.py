"""``python -m bench.profile``: cProfile the service process while it serves ``return 1`` cells.

uvicorn runs in this process (same app, same settings as the bench's subprocess) under cProfile;
the load comes from another process (wrk, or the Python client in a child interpreter), so the
profile holds only the service's own costs.  Worker processes are not in this profile.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import subprocess
import sys
import tempfile
import threading
import time

import httpx

from .load import wrk_available
from .servers import free_port


def _drive(port: int, client: str, concurrency: int, seconds: float) -> None:
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    code = (
        "from bench.load import run_load; "
        f"print(run_load({client!r}, {base + '/v1/exec'!r}, {{'code': 'return 1'}}, {concurrency}, {seconds}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    print(out.stdout.strip(), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--client", choices=("wrk", "python"), default="wrk" if wrk_available() else "python")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--dump", help="also write the raw pstats file here")
    p.add_argument("--sort", default="tottime")
    p.add_argument(
        "--wall",
        action="store_true",
        help="profile wall time (default: CPU time of the event-loop thread, which leaves out "
        "time lost to preemption by workers and other processes on a small machine)",
    )
    args = p.parse_args(argv)

    import uvicorn

    from service.app import create_app
    from service.settings import Settings

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="codemode-bench-profile-") as tmp:
        settings = Settings().replace(data_dir=tmp, workers=args.workers, port=port, log_level="warning").check()
        server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
        profiler = cProfile.Profile() if args.wall else cProfile.Profile(time.thread_time)

        def load_then_stop() -> None:
            try:
                _drive(port, args.client, args.concurrency, 1.0)  # warm-up, not profiled
                started.set()
                _drive(port, args.client, args.concurrency, args.seconds)
            finally:
                stopped.set()
                server.should_exit = True

        started, stopped = threading.Event(), threading.Event()

        async def serve() -> None:
            task = asyncio.create_task(server.serve())
            while not started.is_set():
                await asyncio.sleep(0.01)
            profiler.enable()
            while not stopped.is_set():
                await asyncio.sleep(0.01)
            profiler.disable()
            await task

        threading.Thread(target=load_then_stop, daemon=True).start()
        asyncio.run(serve())
    if getattr(args, "dump", None):
        profiler.dump_stats(args.dump)
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats(args.sort).print_stats(args.top)
    print(buf.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
