"""Install the peers of ``python -m bench peers`` on demand, from npm and PyPI, into a cache directory.

Never part of the test suite or CI: only the bench calls this.  Each peer gets its own directory under
the cache (``.data/bench-peers/`` by default), so one that cannot be installed (no ``node``, no
registry, a native build that fails) leaves the others measurable; the reason is returned and printed in
the table's place for that column.  A directory is reused while its marker names the same packages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .fastmcp_provider import install_monty

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = ROOT / ".data" / "bench-peers"
#: npm packages per Node peer (the versions the project's peer figures name: `run` 2.1, isolated-vm 5).
NPM_PEERS: dict[str, tuple[str, ...]] = {
    "vercel-run": ("run@~2.1",),
    "ai-sdk-code-mode": ("@ai-sdk/code-mode@^1.0", "ai@^7", "run@~2.1"),
    "isolated-vm": ("isolated-vm@^5",),
}
PYPI_PEERS: dict[str, tuple[str, ...]] = {"quickjs-rs": ("quickjs-rs>=0.2,<0.3",)}
MARKER = ".bench-installed.json"
#: Debian's nodejs ships its headers here; node-gyp would otherwise download them (not reachable here).
DEBIAN_NODE_HEADERS = Path("/usr/include/node/node.h")


class PeerUnavailable(Exception):
    """A peer could not be installed; the message says why, for the table."""


@dataclass(frozen=True)
class Peer:
    """An installed peer: the directory its packages are in."""

    key: str
    path: Path


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _run(argv: list[str], cwd: Path, what: str, timeout_s: float = 900) -> None:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise PeerUnavailable(f"{what} took over {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise PeerUnavailable(f"{what} failed ({done.returncode}): {_tail(done.stderr or done.stdout)}")


def _fresh_dir(path: Path, specs: tuple[str, ...]) -> bool:
    """True when ``path`` already holds ``specs`` (its marker says so); else empty it for an install."""
    marker = path / MARKER
    if marker.exists() and json.loads(marker.read_text()) == list(specs):
        return True
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return False


def install_npm(key: str, cache: Path = DEFAULT_CACHE) -> Peer:
    """``npm install`` the packages of Node peer ``key`` into ``cache/npm/key``."""
    specs = NPM_PEERS[key]
    path = cache / "npm" / key
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        raise PeerUnavailable("node and npm are not on PATH (apt-get install nodejs npm)")
    if _fresh_dir(path, specs):
        return Peer(key, path)
    print(f"bench peers: npm install {' '.join(specs)} into {path}", flush=True)
    (path / "package.json").write_text('{"private": true}\n')
    _run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *specs], path, "npm install")
    if key == "isolated-vm":
        # A native addon: newer npm does not run its install script unless allowed, so build it explicitly
        # (against the system's headers where Debian ships them).
        headers = [f"--nodedir={DEBIAN_NODE_HEADERS.parents[2]}"] if DEBIAN_NODE_HEADERS.exists() else []
        _run([npm, "rebuild", "isolated-vm", "--foreground-scripts", *headers], path, "building isolated-vm")
        if not (path / "node_modules" / "isolated-vm" / "out" / "isolated_vm.node").exists():
            raise PeerUnavailable("isolated-vm's native addon was not built (npm rebuild made no isolated_vm.node)")
    (path / MARKER).write_text(json.dumps(list(specs)))
    return Peer(key, path)


def install_pypi(key: str, cache: Path = DEFAULT_CACHE) -> Peer:
    """``pip install --target cache/pypi/key`` the packages of Python peer ``key`` (kept off the venv)."""
    specs = PYPI_PEERS[key]
    path = cache / "pypi" / key
    if _fresh_dir(path, specs):
        return Peer(key, path)
    print(f"bench peers: pip install {' '.join(specs)} into {path}", flush=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", str(path)]
    _run([*pip, *specs], path, "pip install")
    (path / MARKER).write_text(json.dumps(list(specs)))
    return Peer(key, path)


def install_monty_pool(monty_dir: Path) -> Peer:
    """The stock pydantic-monty 1.x copy the other Monty benches use (``bench/fastmcp_provider.py``)."""
    try:
        return Peer("monty-pool", install_monty(monty_dir))
    except subprocess.CalledProcessError as exc:
        raise PeerUnavailable(f"pip install of pydantic-monty failed ({exc.returncode})") from None
