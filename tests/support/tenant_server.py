"""A real ``codemode serve`` on a loopback socket, and a ``/healthz`` probe that times it.

The hostile corpus and ``python -m bench soak`` both need the service exactly as deployed (uvicorn,
worker processes, SQLite in a temp dir, API keys from a TOML file), and a way to see whether any
request held its event loop: the probe asks ``/healthz`` on its own connection every few
milliseconds and records how long each answer took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.servers import descendants, tree_cpu_seconds
from tests.support.live_server import START_TIMEOUT_S, answers, free_port, is_200, serve_argv, spawn

ROOT = Path(__file__).resolve().parents[2]

#: One key per tenant; the corpus uses the first two, the soak all of them (the first four benign).
TENANT_KEYS = {
    "alpha": "ck_test_alpha_0123456789",
    "beta": "ck_test_beta_0123456789",
    "gamma": "ck_test_gamma_0123456789",
    "delta": "ck_test_delta_0123456789",
    "epsilon": "ck_test_epsilon_0123456789",
    "zeta": "ck_test_zeta_0123456789",
    "eta": "ck_test_eta_0123456789",
    "theta": "ck_test_theta_0123456789",
}


def config_toml(plugins: tuple[str, ...] = ("service.demo.shipping",)) -> str:
    lines = ["[tools]", "plugins = [" + ", ".join(f'"{p}"' for p in plugins) + "]", ""]
    for tenant, key in TENANT_KEYS.items():
        lines += ["[[api_keys]]", f'key = "{key}"', f'tenant = "{tenant}"', ""]
    return "\n".join(lines)


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class LiveServer:
    """``python -m service.cli serve`` in its own process group; ``restart()`` after a stall."""

    def __init__(
        self,
        data_dir: Path,
        *,
        workers: int = 2,
        env: dict[str, str] | None = None,
        plugins: tuple[str, ...] = ("service.demo.shipping",),
        root: Path = ROOT,
    ) -> None:
        """``root``: the source tree served (another checkout, for a before/after benchmark)."""
        self.data_dir = data_dir
        self.workers = workers
        self.root = root
        self.config = data_dir / "codemode.toml"
        self.config.write_text(config_toml(plugins))
        self.log = data_dir / "serve.log"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self, ready_timeout_s: float = START_TIMEOUT_S) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
        env.update(
            {
                "CODEMODE_DATA_DIR": str(self.data_dir / "data"),
                "CODEMODE_KILL_GRACE_MS": "300",
                "PYTHONPATH": str(self.root),
                **self.extra_env,
            }
        )
        argv = [*serve_argv(self.port, self.workers), "--config", str(self.config)]
        self.proc = spawn(
            argv,
            answers(self.base + "/readyz", is_200),
            "codemode serve",
            log=self.log,
            env=env,
            cwd=self.root,
            timeout_s=ready_timeout_s,
            new_session=True,
        )

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def answers(self, timeout_s: float = 1.0) -> bool:
        try:
            return httpx.get(self.base + "/healthz", timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False

    def rss_bytes(self) -> tuple[int, int]:
        """(service process, its worker processes) resident set sizes in bytes."""
        return _rss_bytes(self.pid), sum(_rss_bytes(p) for p in descendants(self.pid))

    def cpu_seconds(self) -> float:
        """CPU seconds the service and its workers used so far (``tree_cpu_seconds``)."""
        return tree_cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None or descendants(self.proc.pid):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        """Kill a stalled server (and its workers) and start a fresh one on the same port."""
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.proc = None
        self.restarts += 1
        self.start()


@dataclass
class HealthProbe:
    """A thread asking ``/healthz`` every ``interval_s``; each sample is (start, latency in seconds)."""

    server: LiveServer
    interval_s: float = 0.02
    timeout_s: float = 60.0
    samples: list[tuple[float, float]] = field(default_factory=list)
    failures: int = 0
    _inflight_since: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> HealthProbe:
        self._thread = threading.Thread(target=self._run, name="healthz-probe", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 5)

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout_s) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                self._inflight_since = started
                try:
                    ok = client.get(self.server.base + "/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self._inflight_since = None
                if ok:
                    self.samples.append((started, time.monotonic() - started))
                else:
                    self.failures += 1  # a restart or a refused connection, not a latency
                self._stop.wait(self.interval_s)

    def worst_between(self, t0: float, t1: float) -> float:
        """The slowest probe that overlapped [t0, t1]; a probe still in flight counts as its age."""
        worst = 0.0
        for started, latency in reversed(self.samples):
            if started + latency < t0:
                break
            if started <= t1:
                worst = max(worst, latency)
        inflight = self._inflight_since
        if inflight is not None and inflight <= t1:
            worst = max(worst, time.monotonic() - inflight)
        return worst

    def latencies_between(self, t0: float, t1: float) -> list[float]:
        return [lat for started, lat in self.samples if t0 <= started <= t1]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
