"""Committed store values survive a service restart and a kill -9 right after the cell completed (SPEC §6)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.stores.conftest import redis_url  # noqa: F401 - redis_url is a session fixture
from tests.support.live_server import answers, is_200, spawn
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]


class Service:
    """The real service as a subprocess (``python -m service.cli serve``) on a loopback port."""

    def __init__(self, data_dir: Path, store_url: str | None) -> None:
        self.data_dir = data_dir
        self.store_url = store_url
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "service.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
        env.update({"CODEMODE_DATA_DIR": str(self.data_dir), "CODEMODE_WORKERS": "1", "CODEMODE_LOG_LEVEL": "warning"})
        if self.store_url:
            env["CODEMODE_STORE_URL"] = self.store_url
        # Own process group, so the workers it spawns can be cleaned up after a kill -9.
        self.proc = spawn(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(self.port)],
            answers(self.url + "/readyz", is_200),
            "service",
            log=self.log,
            env=env,
            cwd=REPO,
            new_session=True,
        )

    def exec(self, code: str, **fields: object) -> dict:
        r = httpx.post(self.url + "/v1/exec", json={"code": code, **fields}, timeout=30.0)
        assert r.status_code == 200, r.text
        return r.json()

    def kill_hard(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._reap_group()

    def stop(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._reap_group()

    def _reap_group(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    """The service on the default SQLite file in its data dir, or on the test redis-server."""
    backend = request.node.callspec.params["backend"]
    svc = Service(tmp_path, None if backend == "sqlite" else request.getfixturevalue("redis_url"))
    try:
        yield svc
    finally:
        if svc.proc is not None:
            svc.stop()


@pytest.mark.parametrize(("backend", "how"), [("sqlite", "kill-9"), ("sqlite", "graceful"), ("redis", "kill-9")])
def test_committed_store_survives_restart(service: Service, backend: str, how: str) -> None:
    """A value stored by a completed cell loads after the service is killed (-9) or stopped and restarted."""
    sid = "durable-" + uuid.uuid4().hex[:12]
    service.start()
    code = 'await store("k", {n: 42, s: "é"}); await store("gone", 1); await store("gone", undefined); return "stored";'
    env = service.exec(code, session_id=sid)
    assert env["status"] == "completed" and env["value"] == "stored", env
    if how == "kill-9":
        service.kill_hard()  # right after the response: nothing may still be buffered in the service
    else:
        service.stop()
    if service.store_url is None:
        assert (service.data_dir / "store.sqlite3").exists()
    service.start()
    env = service.exec('return {k: await load("k"), gone: (await load("gone")) === undefined};', session_id=sid)
    assert env["status"] == "completed", env
    assert env["value"] == {"k": {"n": 42, "s": "é"}, "gone": True}
    r = httpx.get(f"{service.url}/v1/sessions/{sid}/store", timeout=10.0)
    assert r.status_code == 200 and [e["key"] for e in r.json()["keys"]] == ["k"], r.text
