"""``codemode-monty``: a stock pydantic-monty 1.x pool runs its workers through it, confined.

Real parts: the pool is pydantic-monty 1.4's own (a ``pip install --target`` copy, in a child process:
the stock release, kept apart from the service's environment), its worker the real ``monty`` binary, the
launcher the installed console script.  Other programs stand in for ``monty`` where a test needs a
program that tries what Monty's language cannot (read a file, fork).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fastmcp_provider import install_monty
from bench.monty_launcher import LAUNCHER, pool_child
from guest_runtime.monty_launcher import REAL_BIN_VARIABLE, REFUSED, cache_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def monty() -> Path:
    try:
        return install_monty()
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"pydantic-monty 1.x cannot be installed here ({exc}), so there is no monty binary to confine")


@pytest.fixture(scope="module")
def reachable(monty: Path) -> Iterator[Path]:
    """A directory the worker user (uid 65534) can enter, holding a copy of the real ``monty`` and a
    ``codemode-monty`` link beside it: a checkout, or pytest's own temporary directory, may sit in a
    directory only root can enter, and the worker runs the real binary after the launcher switched user."""
    where = Path(tempfile.mkdtemp(prefix="codemode-monty-"))
    where.chmod(0o755)
    shutil.copy2(monty / "bin" / "monty", where / "monty")
    (where / "monty").chmod(0o755)
    (where / "codemode-monty").symlink_to(LAUNCHER)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def launch(*args: str, real: str | None = None, launcher: Path = LAUNCHER) -> subprocess.CompletedProcess[str]:
    """The launcher as the stock pool starts it: an empty environment (the variable only when given)."""
    env = {REAL_BIN_VARIABLE: real} if real else {}
    return subprocess.run(
        [str(launcher), *args], env=env, capture_output=True, text=True, errors="replace", timeout=120
    )


def test_the_console_script_is_installed() -> None:
    assert os.access(LAUNCHER, os.X_OK), "reinstall the project (pip install -e .): the script comes with it"
    assert "guest_runtime.monty_launcher" in LAUNCHER.read_text()


def test_a_stock_pool_runs_host_calls_and_limits_in_a_confined_worker(monty: Path, reachable: Path) -> None:
    out = json.loads(pool_child(monty, "layers", str(reachable / "codemode-monty")).stdout)
    assert out["monty"].startswith("1.")
    assert out["host_call"] == 35
    assert out["memory"].startswith("MontyRuntimeError: MemoryError: memory limit exceeded"), out["memory"]
    assert out["time"].startswith("MontyRuntimeError: TimeoutError: feed time limit exceeded"), out["time"]
    worker = out["worker"]
    assert worker["NoNewPrivs"] == "1"
    assert worker["Seccomp"] == "2"
    assert worker["CapEff"] == "0000000000000000"
    assert worker["Threads"] == "2"  # its "monty-worker" thread started under the filter
    assert worker["net"] != out["net_parent"], "the worker shares the pool's network namespace"
    if os.geteuid() == 0:
        assert (worker["Uid"], worker["Gid"]) == ("65534", "65534")
    else:
        print("not root: the launcher keeps the caller's uid (only root can switch)")


def test_check_reports_every_layer_in_force(reachable: Path) -> None:
    done = launch("check", real=str(reachable / "monty"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    if os.geteuid() == 0:
        assert report["missing"] == {}
    assert {"network", "no_new_privs", "landlock", "seccomp"} <= set(report["layers"]), report


def test_the_real_binary_reads_no_file_but_its_own_and_its_libraries() -> None:
    denied = launch("/etc/hostname", real="/bin/cat")
    assert denied.returncode == 1
    assert "/etc/hostname: Permission denied" in denied.stderr
    allowed = launch("/etc/ld.so.cache", real="/bin/cat")  # the loader's cache: on the list
    assert allowed.returncode == 0, allowed.stderr
    assert len(allowed.stdout) > 0


def test_the_real_binary_starts_no_process() -> None:
    # coreutils' timeout forks (clone without CLONE_THREAD) to run its command: refused before any exec.
    done = launch("5", "/bin/true", real="/usr/bin/timeout")
    assert "fork system call failed: Operation not permitted" in done.stderr, done.stderr
    assert done.returncode == 125


def test_without_a_monty_it_refuses_and_says_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "codemode-monty").symlink_to(LAUNCHER)  # no monty beside this link
    done = launch("subprocess", launcher=tmp_path / "alone" / "codemode-monty")
    assert done.returncode == REFUSED
    assert REAL_BIN_VARIABLE in done.stderr
    relative = launch("subprocess", real="monty")
    assert relative.returncode == REFUSED
    assert "must be absolute" in relative.stderr
    (tmp_path / "monty").symlink_to(LAUNCHER)  # a link named monty: the monty beside it is itself
    itself = launch("subprocess", launcher=tmp_path / "monty")
    assert itself.returncode == REFUSED
    assert "is this launcher itself" in itself.stderr


def test_a_cached_filter_anyone_else_could_have_written_is_rebuilt(monty: Path) -> None:
    real = str(monty / "bin" / "monty")
    assert launch("check", real=real).returncode == 0  # the cache exists
    path = Path(cache_path(real))
    allow_everything = "BgAAAAAA/38="  # one BPF instruction: return SECCOMP_RET_ALLOW
    # Planted whole (a rename), so a launcher of a test running beside this one never reads it as trusted.
    planted = path.with_suffix(".planted")
    planted.write_text(json.dumps({"bpf": allow_everything, "files": ["/"]}))
    planted.chmod(0o666)
    planted.replace(path)
    assert launch("check", real=real).returncode == 0
    plan = json.loads(path.read_text())
    assert plan["bpf"] != allow_everything
    assert "/" not in plan["files"]
    assert path.stat().st_mode & 0o777 == 0o600


def _run_as_nobody(binary: str) -> int:
    """The exit status of ``binary --help`` run as uid/gid 65534 (126: the kernel refused to run it)."""
    # Through sh: setpriv itself runs its program as it was before switching (it reaches what root reaches).
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", 'exec "$0" --help', binary]
    return subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode


@pytest.mark.skipif(os.geteuid() != 0, reason="only a service run as root gives its workers another uid")
def test_a_monty_only_root_can_reach_is_copied_where_the_worker_user_can_run_it(
    tmp_path: Path, reachable: Path
) -> None:
    """A checkout in a directory only root enters (a home directory, ``mktemp -d``): the worker user cannot
    run its ``monty`` (the control), so the service runs a copy in a directory anyone may enter and only
    root may write; a binary already in reach is used as it is."""
    from guest_runtime.monty_launcher import environment_monty, runnable_monty

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    hidden = private / "monty"
    shutil.copyfile(environment_monty(), hidden)
    hidden.chmod(0o755)
    assert _run_as_nobody(str(hidden)) == 126
    copy = Path(runnable_monty(str(hidden)))
    assert copy != hidden and copy.read_bytes() == hidden.read_bytes()
    folder = copy.parent.stat()
    assert (folder.st_uid, folder.st_mode & 0o777, copy.stat().st_mode & 0o777) == (0, 0o755, 0o755)
    assert _run_as_nobody(str(copy)) != 126
    assert runnable_monty(str(reachable / "monty")) == str(reachable / "monty")
