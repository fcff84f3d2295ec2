"""Workers and the body decoder run confined by the kernel, as ``/proc`` shows from outside.

Real pool workers and the real decoder helper of a running service, read through
``/proc/<pid>/status``, ``/proc/<pid>/ns/net`` and ``/proc/<pid>/fd``; the service's own report of
its layers (``/readyz``, the ``codemode_sandbox_layer`` gauge, its start-up log line); the modes
``off`` and ``strict``; and a service started as a non-root user.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pwd
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from guest_runtime.confinement import LAYERS
from service.errors import ConfigError, WorkerGone
from service.runtime.workers.process import start_worker
from service.runtime.workers.sandbox import OFF_WARNING, sandbox_options, worker_user
from tests.conftest import make_client, run_ok
from tests.support.live_server import ROOT, is_200, live_process
from tests.support.polling import poll_until
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

AS_ROOT = os.geteuid() == 0
NOBODY = pwd.getpwnam("nobody").pw_uid
CAPABILITY_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
BIG_BODY_BYTES = 300 * 1024  # over the decoder's inline limit: decoded in the helper process


def status(pid: int) -> dict[str, str]:
    """``/proc/<pid>/status`` as a dict of its fields."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


#: Threads of a worker that runs Python cells (its Monty client's runtime sizes itself to the CPUs its thread
#: may use when it starts, and the worker starts it placed on one: one thread) and of its Monty child (its one).
PYTHON_WORKER_THREADS = "2"
MONTY_CHILD_THREADS = "2"


def assert_confined(pid: int, service_uid: int, threads: str = "1") -> None:
    """Seccomp filter, no_new_privs, no capability in any set, ``threads`` threads, own network namespace,
    and not the service's uid (a service that is not root cannot give its workers another one)."""
    fields = status(pid)
    assert (fields["Seccomp"], fields["NoNewPrivs"], fields["Threads"]) == ("2", "1", threads), fields
    assert {name: int(fields[name], 16) for name in CAPABILITY_SETS} == dict.fromkeys(CAPABILITY_SETS, 0)
    uids = {int(uid) for uid in fields["Uid"].split()}
    assert uids == ({NOBODY} if service_uid == 0 else {service_uid}), fields["Uid"]
    assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink(f"/proc/{os.getpid()}/ns/net")


def open_files(pid: int) -> list[str]:
    """What each of the process's descriptors points at."""
    return [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int)]


def children(pid: int) -> list[int]:
    """The process's child processes (every thread's)."""
    kids: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        kids += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return kids


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def assert_body_decoder_confined(base: str, service: int, service_uid: int) -> None:
    """A body large enough for a helper process decodes, and every helper process runs confined,
    started like a worker (``python -I -m service.helpers.process``), holding only its pipes to the
    service (its stderr too: a pipe the service reads, not the service's log).  No process of the
    service runs multiprocessing or its resource tracker (the helpers used to)."""
    answer = httpx.post(base + "/v1/exec", json={"code": "return 1 // " + "x" * BIG_BODY_BYTES}, timeout=30).json()
    assert answer["status"] == "completed", answer
    commands = {pid: command_line(pid) for pid in children(service)}
    assert not [c for c in commands.values() if "multiprocessing" in c or "resource_tracker" in c], commands
    helpers = [pid for pid, command in commands.items() if "-I -m service.helpers.process" in command]
    assert helpers, "a helper process runs"
    for helper in helpers:
        poll_until(lambda: status(helper)["Seccomp"] == "2", f"helper {helper} installs its filter")  # noqa: B023
        assert_confined(helper, service_uid)
        files = open_files(helper)
        assert len(files) == 4 and all(f.startswith("pipe:") for f in files), files
        assert os.readlink(f"/proc/{helper}/cwd") == "/"


def assert_monty_child_confined(worker: int, service_uid: int) -> None:
    """A worker that runs Python cells has one child, the real ``monty subprocess``, started after the
    worker confined itself: it shows the same layers in /proc (the worker's filter, no_new_privs, no
    capability, the worker user) and the worker's own network namespace, not the service's."""
    (child,) = children(worker)
    assert command_line(child).endswith("/monty subprocess "), command_line(child)
    # The child starts its interpreter's thread as it starts up, which on a busy machine (and on its one
    # CPU) may come after the worker said it was ready.
    poll_until(lambda: status(child)["Threads"] == MONTY_CHILD_THREADS, f"Monty child {child} starts its thread")
    assert_confined(child, service_uid, threads=MONTY_CHILD_THREADS)
    assert status(child)["Seccomp_filters"] == status(worker)["Seccomp_filters"] == "1"
    assert os.readlink(f"/proc/{child}/ns/net") == os.readlink(f"/proc/{worker}/ns/net")


def test_pool_workers_run_confined_and_say_so(tmp_path):
    """Every pool worker shows the layers in /proc, holds only pipes, sockets and event descriptors (no
    file), and runs cells as before: a JavaScript worker has one thread and no child; a worker made for
    Python cells has its Monty child, confined too (``assert_monty_child_confined``); /readyz and the
    gauge report each layer."""
    with make_client(tmp_path) as client:
        pool = client.app.state.services.pool  # type: ignore[attr-defined]
        assert run_ok(client, "[x * 2 for x in [1, 2]]", language="python")["value"] == [2, 4]
        kinds = lambda: {w.python for w in pool.workers()} == {False, True}  # noqa: E731
        workers = poll_until(lambda: pool.workers() if kinds() else None, "a worker of each kind")
        for worker in workers:
            if not worker.python:
                assert_confined(worker.pid, os.geteuid())
                assert children(worker.pid) == [] and all(f.startswith("pipe:") for f in open_files(worker.pid))
                continue
            assert_confined(worker.pid, os.geteuid(), threads=PYTHON_WORKER_THREADS)
            # stdin (frames in), fd 1 and 2 (the stderr pipe the service reads), the frame channel out; then
            # the Monty client's pipes to its child, its epoll, eventfd, pidfd and wake-up socket pair.
            files = open_files(worker.pid)
            assert all(f.startswith(("pipe:", "socket:", "anon_inode:")) for f in files), files
            assert_monty_child_confined(worker.pid, os.geteuid())
        assert run_ok(client, "return [1, 2].map(x => x * 2)")["value"] == [2, 4]
        sandbox = client.get("/readyz").json()["sandbox"]
        expected = {layer: AS_ROOT or layer != "uid" for layer in LAYERS}
        assert (sandbox["mode"], sandbox["layers"]) == ("auto", expected)
        assert set(sandbox["missing"]) == {layer for layer, on in expected.items() if not on}
        metrics = client.get("/metrics").text
        for layer, on in expected.items():
            assert f'codemode_sandbox_layer{{layer="{layer}",mode="auto"}} {1.0 if on else 0.0}' in metrics


def test_a_live_service_logs_its_layers_and_confines_its_body_decoder(tmp_path):
    """`codemode serve` logs the layers in force at start; the helper that decodes large bodies runs
    confined too (its descriptors: its pipes to the service, not the service's log)."""
    port = free_port()
    argv = [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "1", "--log-level", "info"]
    base = f"http://127.0.0.1:{port}"
    with live_process(argv, base + "/readyz", tmp_path, ready=is_200) as server:
        log = (tmp_path / "server.log").read_text()
        in_force = [layer for layer in LAYERS if AS_ROOT or layer != "uid"]
        assert f"worker sandbox (auto): {', '.join(in_force)} in force" in log, log
        assert_body_decoder_confined(base, server.pid, os.geteuid())


def test_sandbox_off_warns_loudly_and_confines_nothing(tmp_path, caplog):
    """With sandbox = "off" the start-up log warns, workers run unconfined, and /readyz says so."""
    with caplog.at_level(logging.WARNING, logger="codemode.workers"), make_client(tmp_path, sandbox="off") as client:
        pool = client.app.state.services.pool  # type: ignore[attr-defined]
        worker = poll_until(lambda: next(iter(pool.workers()), None), "a warm worker")
        assert status(worker.pid)["Seccomp"] == "0"
        sandbox = client.get("/readyz").json()["sandbox"]
        assert (sandbox["mode"], sandbox["layers"]) == ("off", dict.fromkeys(LAYERS, False))
    assert OFF_WARNING in caplog.text


def test_a_strict_worker_refuses_to_start_without_a_layer():
    """In strict mode a worker that cannot have a layer (here: no filter to load) does not start,
    and the failure names the layer."""
    options = sandbox_options("strict", "nobody")
    del options["seccomp_bpf"], options["python_seccomp_bpf"]
    options["seccomp_missing"] = "libseccomp was not found"

    async def scenario() -> str:
        with pytest.raises(WorkerGone) as info:
            await start_worker({"frame_cap": 1 << 20, "sandbox": options}, 1 << 20)
        return str(info.value)

    message = asyncio.run(scenario())
    assert 'sandbox = "strict" and the seccomp layer is not available: libseccomp was not found' in message


def test_the_worker_user_must_exist_and_not_be_root():
    """worker_user names an existing unprivileged user or a numeric uid; root or an unknown name stops the start."""
    assert worker_user("nobody") == (NOBODY, pwd.getpwnam("nobody").pw_gid)
    assert worker_user("4242") == (4242, 4242)  # no such user: its own number as the group
    for name, text in (("root", "is root"), ("0", "is root"), ("no-such-user-here", "not a user of this system")):
        with pytest.raises(ConfigError) as info:
            worker_user(name)
        assert text in info.value.message and info.value.need_param == "worker_user"


# ---- a service that is not root -------------------------------------------------------------------


def _hidden_from(uid: int, path: Path) -> Path | None:
    """The highest directory above ``path`` that ``uid`` cannot pass through (mode without o+x), if any."""
    for parent in reversed(path.parents):
        info = parent.stat()
        if info.st_uid != uid and not info.st_mode & 0o001:
            return parent
    return None


@contextmanager
def as_nobody(argv: list[str]) -> Iterator[tuple[list[str], Path]]:
    """``argv`` run as nobody, in a private mount namespace where the interpreter and this checkout
    are reachable (here Python lives under /root, mode 0700: each blocked directory is covered by an
    empty tmpfs into which the needed paths are bind-mounted back).  Yields the command and a data
    directory nobody owns."""
    needed = [Path(p).resolve() for p in (sys.base_prefix, sys.prefix, ROOT)]
    hidden = sorted({h for p in needed if (h := _hidden_from(NOBODY, p)) is not None})
    script = ["set -e", "stash=$(mktemp -d)"]
    for i, path in enumerate(needed):
        script.append(f'mkdir "$stash/{i}" && mount --bind "{path}" "$stash/{i}"')
    script += [f'mount -t tmpfs -o mode=0755 codemode-test "{h}"' for h in hidden]
    for i, path in enumerate(needed):
        script.append(f'mkdir -p "{path}" && mount --bind "$stash/{i}" "{path}"')
    script.append(f'exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "$@"')
    data = Path(tempfile.mkdtemp(prefix="codemode-nobody-"))
    os.chown(data, NOBODY, NOBODY)
    try:
        yield ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script), "sh", *argv], data
    finally:
        subprocess.run(["rm", "-rf", str(data)], check=False)


def _serve(port: int) -> list[str]:
    return [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "1", "--log-level", "info"]


@pytest.mark.skipif(not AS_ROOT, reason="the suite runs as a non-root user: every other test here is that case")
def test_a_service_run_as_another_user_confines_its_workers(tmp_path):
    """`codemode serve` started as nobody: its workers and its body decoder keep its uid (only root can give
    them another one, and /readyz says why uid is missing) but have every other layer, their network
    namespace included (inside a user namespace of their own)."""
    port = free_port()
    with as_nobody(_serve(port)) as (argv, data):
        base = f"http://127.0.0.1:{port}"
        env = {"CODEMODE_DATA_DIR": str(data), "HOME": str(data)}
        with live_process(argv, base + "/readyz", tmp_path, env=env, ready=is_200) as server:
            service = next(pid for pid in [server.pid, *children(server.pid)] if "service.cli" in command_line(pid))
            assert status(service)["Uid"].split()[0] == str(NOBODY)

            # One warm worker of each kind (--workers 1), once both have started (/readyz waits for one): the
            # Python one has its Monty child, the other none.
            def started() -> list[int] | None:
                pids = [pid for pid in children(service) if "guest_runtime.worker" in command_line(pid)]
                confined = len(pids) == 2 and all(status(pid)["Seccomp"] != "0" for pid in pids)
                return pids if confined and sum(bool(children(pid)) for pid in pids) == 1 else None

            workers = poll_until(started, "both warm workers started")
            python = [pid for pid in workers if children(pid)]
            assert len(python) == 1, workers
            for pid in workers:
                if pid in python:
                    assert_confined(pid, NOBODY, threads=PYTHON_WORKER_THREADS)
                    assert_monty_child_confined(pid, NOBODY)
                else:
                    assert_confined(pid, NOBODY)
            sandbox = httpx.get(base + "/readyz").json()["sandbox"]
            assert sandbox["layers"] == {layer: layer != "uid" for layer in LAYERS}
            assert "only root can start workers under another uid" in sandbox["missing"]["uid"]
            answer = httpx.post(base + "/v1/exec", json={"code": "return 6 * 7"}, timeout=30).json()
            assert answer["value"] == 42, answer
            assert_body_decoder_confined(base, service, NOBODY)
        assert (
            "worker sandbox (auto): fds, network, capabilities, not_dumpable" in (tmp_path / "server.log").read_text()
        )


@pytest.mark.skipif(not AS_ROOT, reason="the suite runs as a non-root user: strict mode cannot switch uids there")
def test_strict_mode_refuses_to_serve_without_every_layer(tmp_path):
    """sandbox = "strict" in a service that is not root (so workers cannot get another uid): it stops at
    start with an error naming the missing layer, instead of serving with fewer layers."""
    with as_nobody(_serve(free_port())) as (argv, data):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CODEMODE_DATA_DIR": str(data), "CODEMODE_SANDBOX": "strict"}
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert 'sandbox = "strict"' in done.stderr and "the uid layer is not available" in done.stderr, done.stderr


def test_a_process_running_two_threads_is_refused():
    """Namespaces, capabilities and Landlock act on one thread: a process with a second thread is refused
    (in auto mode too) instead of being half confined."""
    script = (
        "import threading\n"
        "from guest_runtime.confinement import confine\n"
        "from guest_runtime.errors import ConfinementError\n"
        "stop = threading.Event()\n"
        "threading.Thread(target=stop.wait).start()\n"
        "try:\n"
        "    confine({'mode': 'auto'}, keep_fds=(0, 1, 2))\n"
        "except ConfinementError as exc:\n"
        "    print(exc)\n"
        "stop.set()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "the process runs 2 threads; it can only confine itself single-threaded", done
