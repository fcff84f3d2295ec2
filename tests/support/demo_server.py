"""`codemode serve --demo` on a free loopback port: the shipping plugin and the travel MCP server."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.support.live_server import live_process
from tests.support.ports import free_port


@contextmanager
def demo_serve(workdir: Path, *, config: str | None = None, args: Sequence[str] = ("--demo",)) -> Iterator[str]:
    """A real `codemode serve` (two workers) started with ``args``; yields its base URL."""
    port = free_port()
    argv = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--workers", "2", "--log-level", "warning", *args]
    base = f"http://127.0.0.1:{port}"
    with live_process(argv, base + "/healthz", workdir, config=config):
        yield base
