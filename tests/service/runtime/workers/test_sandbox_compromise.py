"""The second wall holds without an exploit: an attacker's native code in a confined worker is refused.

Each test starts a worker the way the pool does (``start_worker`` with the pool's own options, so the
same command line, environment and ``confine`` call), and the test-only payload
``tests/support/compromised_worker.py`` stands for code that a QuickJS memory bug let in: it calls
libc directly.  Its targets are real: the service's own SQLite store file, a real redis-server on
loopback, this process (the service) and its ``/proc`` entries.

Each test runs against both worker profiles: a JavaScript-only service's (``python_cells = false``: the
strictest), and a service with Python cells, whose workers may start their one Monty child (the real
``monty`` binary, the one file Landlock leaves them): there a path is refused by Landlock (EACCES) rather
than by the filter, executable memory can be mapped (the child's loader needs it, and the child inherits
the worker's filter), and ``execve`` fails instead of killing.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.messages import TEST_PAYLOAD_VARIABLE, SandboxOptions, run_frame
from service.errors import ConfigError, WorkerGone
from service.runtime.workers.process import start_worker
from service.runtime.workers.stderr_relay import MAX_BYTES, MAX_LINE_BYTES
from service.settings_load import load_settings
from tests.conftest import make_client
from tests.stores.conftest import start_redis_server, stop_redis_server

#: Probes whose call fails with EPERM from the system-call filter (the outermost layer).
REFUSED = (
    "read_etc_passwd",
    "read_store_file",
    "create_file",
    "connect_redis",
    "fork",
    "kill_service",
    "read_service_environ",
    "mmap_executable",
    "setuid_root",
    "raise_cpu_limit",
    "pin_service",
    "pin_neighbour",
    "pin_self",
)
#: Probes that kill the worker (SIGSYS): calls only an exploit makes.
KILLING = ("execve_shell", "ptrace_service")
ROOT = os.geteuid() == 0


#: What each probe gets in a worker that runs Python cells, where it differs from REFUSED's EPERM.
PYTHON_WORKER = {
    "read_etc_passwd": errno.EACCES,  # openat is allowed (the child's loader needs it): Landlock refuses
    "read_store_file": errno.EACCES,
    "create_file": errno.EACCES,
    "read_service_environ": errno.EACCES,
    "mmap_executable": 0,  # the Monty child's loader maps its libraries executable under this filter
    "pin_self": 0,  # its own thread's CPUs only: it places its Monty client on its child's CPU
}


@pytest.fixture(scope="module", params=["javascript", "python"])
def service(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A running service (its SQLite store file exists) with workers of one profile (JavaScript only, or
    Python cells too) and a real redis-server on loopback."""
    tmp = tmp_path_factory.mktemp("compromise")
    port, redis = start_redis_server(tmp / "redis")
    python = request.param == "python"
    try:
        with make_client(tmp / "data", python_cells=python) as client:
            svc = client.app.state.services  # type: ignore[attr-defined]
            store = Path(svc.settings.resolved_store_url.removeprefix("sqlite:///"))
            assert store.stat().st_size > 0
            yield {"pool": svc.pool, "store": store, "redis_port": port, "tmp": tmp, "python": python}
    finally:
        stop_redis_server(redis)


def refused(service: dict[str, Any]) -> dict[str, int]:
    """What each REFUSED probe gets in this service's workers."""
    expected = dict.fromkeys(REFUSED, errno.EPERM)
    return {**expected, **PYTHON_WORKER} if service["python"] else expected


def attack(service: dict[str, Any], probes: tuple[str, ...], sandbox: SandboxOptions | None = None) -> Any:
    """Start a worker with the pool's options (or ``sandbox`` instead of the pool's), run ``probes`` in it.

    Returns ``(results, None)`` from the payload's frame, or ``(None, exit status)`` if the worker died.
    """
    pool = service["pool"]
    kind = pool.supply.python_options if service["python"] else pool.supply.options  # the pool's two kinds
    options = {**kind, "sandbox": sandbox if sandbox is not None else kind["sandbox"]}
    plan = {
        "probes": list(probes),
        "service_pid": os.getpid(),
        "redis_port": service["redis_port"],
        "neighbour_pid": next(w.pid for w in pool.supply.alive if not w.dead),  # another tenant's, same uid
        "paths": {"store": str(service["store"]), "new_file": str(service["tmp"] / f"planted-{len(probes)}")},
    }

    async def scenario() -> Any:
        worker = await start_worker(options, pool.supply.frame_cap, test_payload=json.dumps(plan))
        assert worker.sandbox is not None
        try:
            frame: Any = await worker.recv()
            return frame["results"], worker.sandbox
        except WorkerGone:
            return None, worker.proc.returncode
        finally:
            worker.kill()
            await worker.proc.wait()

    return asyncio.run(scenario())


def test_every_escape_of_a_compromised_worker_is_refused(service):
    """Open /etc/passwd and the store's SQLite file, write a file, socket+connect to a loopback Redis, fork,
    kill the service, read its /proc/<pid>/environ, map executable memory, setuid(0), raise an rlimit, set
    the CPUs of the service or of another worker (a Python worker may set its own thread's only): each
    fails with EPERM, while an allowed call (getpid) still works; nothing was written."""
    results, report = attack(service, ("own_pid", *REFUSED))
    assert report["missing"] == ({} if ROOT else {"uid": report["missing"]["uid"]})
    assert results == {"own_pid": 0, **refused(service)}
    assert not (service["tmp"] / f"planted-{1 + len(REFUSED)}").exists()


@pytest.mark.parametrize("probe", KILLING)
def test_exec_and_ptrace_kill_the_compromised_worker(service, probe):
    """execve("/bin/sh") and ptrace of the service are calls only an exploit makes: the worker dies by
    SIGSYS at the first one, and the service is not traced.  A worker that runs Python cells may execve
    (its Monty child): there Landlock refuses /bin/sh (EACCES), the one file it may run being monty."""
    results, status = attack(service, (probe,))
    if service["python"] and probe == "execve_shell":
        assert results == {probe: errno.EACCES}
        return
    assert results is None and status == -signal.SIGSYS
    tracer = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("TracerPid"))
    assert tracer.split()[1] == "0"


@pytest.mark.skipif(not ROOT, reason="the control needs root: as another user, reading root's files would fail anyway")
def test_the_same_probes_succeed_in_an_unconfined_worker(service):
    """The control: with sandbox off, every probe above succeeds (so the refusals are the sandbox's work)."""
    if service["python"]:
        pytest.skip("the control is the same for both profiles: it runs once, with the JavaScript-only service")
    results, report = attack(service, ("own_pid", *REFUSED), {"mode": "off"})
    assert report["layers"] == []
    assert results == {"own_pid": 0, **{name: 0 for name in REFUSED}}
    (service["tmp"] / f"planted-{1 + len(REFUSED)}").unlink()


#: Without the system-call filter, what each probe gets from the layers below it.
WITHOUT_FILTER = {
    "read_etc_passwd": {errno.EMFILE, errno.EACCES},  # RLIMIT_NOFILE is full; Landlock refuses the path
    "read_store_file": {errno.EMFILE, errno.EACCES},
    "create_file": {errno.EMFILE, errno.EACCES},
    "read_service_environ": {errno.EMFILE, errno.EACCES},
    "connect_redis": {errno.EMFILE, errno.ENETUNREACH},  # no descriptor left; the namespace has no route
    "fork": {errno.EAGAIN},  # RLIMIT_NPROC 0 for the worker user
    "kill_service": {errno.EPERM},  # another uid, and Landlock's signal scope
    "pin_service": {errno.EPERM},  # another uid
    "pin_neighbour": {0},  # the same uid: the filter alone keeps a worker off other workers' CPUs
    "setuid_root": {errno.EPERM},  # no capability left
    "execve_shell": {errno.EACCES},  # Landlock: nothing may be executed
    "ptrace_service": {errno.EPERM},  # another uid, not dumpable, and outside the Landlock domain
}


@pytest.mark.skipif(not ROOT, reason="as another user the workers keep its uid, so kill and fork answer differently")
def test_without_the_filter_the_layers_below_still_refuse(service):
    """With the seccomp filter left out, every escape is still refused, by the other layers alone."""
    left_out = ("seccomp_bpf", "python_seccomp_bpf")
    sandbox = {k: v for k, v in service["pool"].supply.options["sandbox"].items() if k not in left_out}
    results, report = attack(service, tuple(WITHOUT_FILTER), {**sandbox, "seccomp_missing": "left out by this test"})
    assert report["missing"] == {"seccomp": "left out by this test"}
    # A worker that runs Python cells has no RLIMIT_NPROC (its threads count against it): without the
    # filter its fork succeeds, and the child holds every other layer the worker holds; its spare
    # descriptors let socket() succeed, and Landlock's TCP rights (or the empty namespace) refuse connect.
    python = {"fork": {0}, "connect_redis": {errno.EACCES, errno.ENETUNREACH}}
    expected = {**WITHOUT_FILTER, **python} if service["python"] else WITHOUT_FILTER
    assert {name: results[name] in allowed for name, allowed in expected.items()} == dict.fromkeys(expected, True), {
        name: results[name] for name in expected
    }


def test_a_worker_writes_its_stderr_to_a_capped_pipe_not_the_service_log(service, caplog, capfd):
    """A worker's stderr is a pipe the service reads: each line is logged under the worker's pid and cut at
    1 KiB, and after 64 KiB the service closes the pipe (the flooding worker's next write fails with EPIPE);
    nothing reaches the service's own stderr."""
    with caplog.at_level(logging.WARNING, logger="codemode.workers"):
        results, _ = attack(service, ("flood_stderr",))
    assert results == {"flood_stderr": errno.EPIPE}
    lines = [record.getMessage() for record in caplog.records if record.name == "codemode.workers"]
    pid = next(line.split(":")[0] for line in lines if line.endswith(": attacker says hi"))
    assert f"{pid}: {'y' * MAX_LINE_BYTES}" in lines
    assert f"{pid}: stderr passed {MAX_BYTES} bytes; the rest is dropped" in lines
    assert sum(len(line) for line in lines) < MAX_BYTES + 4 * MAX_LINE_BYTES
    assert "attacker says hi" not in capfd.readouterr().err


def test_the_test_payload_cannot_be_switched_on_in_a_deployment(tmp_path, monkeypatch):
    """The service never passes the payload variable to a worker (it is not in the workers' environment
    allowlist, and as a CODEMODE_ variable it is an unknown setting); a worker outside a development
    checkout (no tests/ beside it) that is given it anyway refuses to start."""
    monkeypatch.setenv(TEST_PAYLOAD_VARIABLE, json.dumps({"probes": ["read_etc_passwd"]}))
    with pytest.raises(ConfigError):
        load_settings()

    async def serves_cells() -> Any:
        worker = await start_worker({"frame_cap": 1 << 20}, 1 << 20)
        try:
            await worker.send(run_frame(**RETURN_ONE))
            return await worker.recv()
        finally:
            worker.kill()
            await worker.proc.wait()

    assert asyncio.run(serves_cells())["text"] == "1"
    for package in ("bridge", "guest_runtime"):
        shutil.copytree(Path(__file__).resolve().parents[4] / package, tmp_path / package)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), TEST_PAYLOAD_VARIABLE: "{}"}
    done = subprocess.run(
        [sys.executable, "-m", "guest_runtime.worker", "{}"], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    assert done.returncode != 0 and done.stdout == b""
    assert b"not a development checkout: refused" in done.stderr, done.stderr


RETURN_ONE: dict[str, Any] = {
    "cell_id": "c",
    "code": "return 1",
    "budget_ms": 5000,
    "memory_limit_bytes": 32 << 20,
    "max_output_bytes": 65536,
    "value_capture_bytes": 65536,
    "config": {"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
}
