"""``codemode-monty``: confines Monty 1.x's ``monty subprocess`` worker, then execs it.

A stock ``pydantic-monty`` 1.x pool (FastMCP's default sandbox, Microsoft Agent Framework) starts each
worker as ``<binary> subprocess`` with an empty environment.  Given this launcher as that binary
(``binary_path=`` or ``MONTY_BIN``), the worker gets the kernel layers of ``confinement.py``: a new
network namespace, uid/gid 65534 (when started as root), no capabilities, not dumpable,
no_new_privs, Landlock allowing only reading and running the real ``monty``, its shared libraries
and ``/etc/ld.so.cache``, a cap on open files and a seccomp allowlist made for the Monty worker.
Then it *execs* the real binary (no fork), so the pool's pid-based kill and timeouts hit the worker.

The real binary is, in this order:

1. ``CODEMODE_MONTY_REAL_BIN``, when the launcher's environment names it (the stock pool passes none);
2. the ``monty`` beside the path the launcher was started by (its ``argv[0]``, links not followed):
   a link to ``codemode-monty`` placed in the directory of the real ``monty`` confines that one.

``codemode-monty check`` puts the layers in force and prints which hold, as JSON, instead of exec'ing.

The filter is built by libseccomp, whose binding takes ~0.2 s to load, so it is built once and kept
with the list of files the loader opens (from ``ldd``) in ``~/.cache/codemode/`` of the user the
launcher runs as, named by a hash of the rules and of the binary's and loader cache's identity: a
changed allowlist, binary or library set builds a new one.  A cache file anyone else could have
written is ignored.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pwd
import stat
import sys
from typing import TYPE_CHECKING, NoReturn

from .confinement import (
    ALLOWED,
    CLONE_THREAD,
    KILLED,
    MONTY_START,
    NOT_EXECUTABLE,
    PR_SET_NAME,
    READ_OWN_LIMITS,
    Profile,
    Rule,
    build_filter,
    confine,
)
from .errors import ConfinementError

if TYPE_CHECKING:
    from bridge.messages import SandboxOptions

REAL_BIN_VARIABLE = "CODEMODE_MONTY_REAL_BIN"
#: "nobody": the worker's uid and gid when the launcher runs as root.
WORKER_UID = WORKER_GID = 65534
#: Descriptors above stdin/stdout/stderr: the loader opens one library at a time; Rust's runtime
#: reads /proc/self/maps (denied by Landlock, which it tolerates).
SPARE_FDS = 8
LOADER_CACHE = "/etc/ld.so.cache"
#: Exit status when the launcher refuses to start the worker (the pool sees the worker die at once).
REFUSED = 2

# ---- the Monty worker's system calls -----------------------------------------------------------
# Measured with strace on ``monty subprocess`` 1.4 under the stock pool (a host call, a memory and a
# time limit): the loader's start-up (execve, openat, fstat, mmap of libraries, arch_prctl), Rust's
# runtime start (poll of fds 0-2, sigaltstack, prlimit64 reads, sched_getaffinity), its one thread,
# then read/write on its pipes, memory, futexes and randomness.  Landlock bounds what openat and
# execve can reach; mmap must map the libraries executable, so unlike the Python worker's filter
# executable memory is not refused here.

_ALLOWED = (
    *ALLOWED,  # codemode's workers' steady state: pipes, memory, futexes, clocks, signals, exit
    *NOT_EXECUTABLE,  # without their PROT_EXEC condition: the loader maps the libraries executable
    *MONTY_START,  # the loader (exec only the binary) and Rust's runtime start
)
#: The Python worker's, but for execve: the loader needs it (Landlock leaves only the real monty).
_KILLED = tuple(name for name in KILLED if name != "execve")
MONTY_RULES: tuple[Rule, ...] = (
    *(("allow", name, ()) for name in _ALLOWED),
    ("allow", "prlimit64", READ_OWN_LIMITS),
    ("allow", "prctl", ((0, "eq", PR_SET_NAME, 0),)),  # naming its thread "monty-worker"
    # Threads only, never a process: clone must carry CLONE_THREAD; clone3 (flags in memory, which
    # seccomp cannot read) fails as if missing, and glibc falls back to clone.
    ("allow", "clone", ((0, "masked_eq", CLONE_THREAD, CLONE_THREAD),)),
    ("enosys", "clone3", ()),
    *(("kill", name, ()) for name in _KILLED),
)


# ---- the launcher ------------------------------------------------------------------------------


def main() -> NoReturn:
    """The ``codemode-monty`` console script."""
    args = sys.argv[1:]
    try:
        real = real_binary(sys.argv[0], os.environ.get(REAL_BIN_VARIABLE, ""))
        bpf, why, files = _plan(real)
        options: SandboxOptions = {
            "mode": "auto",
            "uid": WORKER_UID,
            "gid": WORKER_GID,
            "seccomp_bpf": bpf,
            "seccomp_missing": why,
        }
        report = confine(options, (0, 1, 2), Profile(run_files=(real, *files), spare_fds=SPARE_FDS, max_processes=None))
    except ConfinementError as exc:
        _refuse(str(exc))
    if args == ["check"]:
        sys.stdout.write(json.dumps(report) + "\n")
        sys.stdout.flush()
        os._exit(0)  # the interpreter's own shutdown is not the worker's business
    if report["missing"]:
        missing = "; ".join(f"{layer}: {why}" for layer, why in report["missing"].items())
        sys.stderr.write(f"codemode-monty: the worker runs without these layers: {missing}\n")
    try:
        os.execv(real, [real, *args])
    except OSError as exc:
        _refuse(f"cannot run {real}: {exc}")


def _refuse(why: str) -> NoReturn:
    sys.stderr.write(f"codemode-monty: {why}\n")
    sys.stderr.flush()
    os._exit(REFUSED)


def real_binary(started_as: str, named: str) -> str:
    """The real ``monty``'s resolved path: ``named`` (the variable), else the one beside ``started_as``."""
    if named:
        candidate, source = named, f"{REAL_BIN_VARIABLE}={named!r}"
    else:
        candidate = os.path.join(os.path.dirname(os.path.abspath(started_as)), "monty")
        source = f"the monty beside {started_as!r}"
    if not os.path.isabs(candidate):
        raise ConfinementError(f"{source}: the path must be absolute")
    real = os.path.realpath(candidate)
    if not (os.path.isfile(real) and os.access(real, os.X_OK)):
        raise ConfinementError(
            f"no monty binary at {source}; set {REAL_BIN_VARIABLE} to the real monty, or start codemode-monty "
            "by a link to it placed in the real monty's directory (pip install pydantic-monty puts monty there)"
        )
    if real == os.path.realpath(started_as):
        raise ConfinementError(f"{source} is this launcher itself; name the link anything but monty")
    return real


def _plan(real: str) -> tuple[str, str, list[str]]:
    """``(bpf, why none, files the loader opens)`` for ``real``: from the cache, or built and cached."""
    path = cache_path(real)
    if path:
        try:
            bpf, files = _read_trusted(path)
            return bpf, "", files
        except (OSError, ValueError):
            pass
    files = _loader_files(real)
    bpf, why = build_filter(MONTY_RULES)
    if bpf and path:
        _write_cache(path, {"bpf": bpf, "files": files})
    return bpf, why, files


def cache_path(real: str) -> str:
    """Where the plan for ``real`` is kept: the home of the user the launcher runs as, named by a hash;
    ``""`` for a user without a home (a uid the password database does not know)."""
    binary = os.stat(real)
    loader_cache = os.stat(LOADER_CACHE).st_mtime_ns if os.path.exists(LOADER_CACHE) else 0
    identity = repr((MONTY_RULES, real, binary.st_ino, binary.st_size, binary.st_mtime_ns, loader_cache, os.uname()))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:32]
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return ""
    return os.path.join(home, ".cache", "codemode", f"monty-launcher-{digest}.json")


def _read_trusted(path: str) -> tuple[str, list[str]]:
    with open(path, "rb") as fh:
        for st in (os.fstat(fh.fileno()), os.stat(os.path.dirname(path))):
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                raise ValueError(f"{path} could have been written by another user")
        plan = json.loads(fh.read(1 << 20))
    bpf, files = (
        plan.get("bpf") if isinstance(plan, dict) else None,
        plan.get("files") if isinstance(plan, dict) else None,
    )
    if not isinstance(bpf, str) or not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise ValueError(f"{path} is not a launcher plan")
    return bpf, files


def _write_cache(path: str, plan: dict[str, object]) -> None:
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        temporary = f"{path}.{os.getpid()}"
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
            json.dump(plan, fh)
        os.replace(temporary, path)
    except OSError:
        pass  # a home that cannot be written (nobody's): every start builds the filter instead


def environment_monty() -> str:
    """The ``monty`` binary of this Python environment (where ``pydantic-monty-runtime`` installs it)."""
    import sysconfig

    return os.path.realpath(os.path.join(sysconfig.get_path("scripts"), "monty"))


@functools.cache
def runnable_monty(real: str) -> str:
    """``real``, or a copy of it the worker user can run.

    A service started as root runs its Monty children as the worker user, who must be able to reach the
    binary; a checkout and its virtualenv may sit in a directory only root enters (a home directory, a
    ``mktemp -d``).  Then the binary is copied, once per process, into a fresh directory that anyone may
    enter and only root may write (removed at exit); its libraries are the system's, found as before.
    """
    if os.geteuid() != 0 or _others_can_run(real):
        return real
    import atexit  # only in a service that needs the copy (the launcher itself never does)
    import shutil
    import tempfile

    for base in (tempfile.gettempdir(), "/tmp", "/dev/shm", "/var/tmp"):
        if os.path.isdir(base) and _others_can_run(base):
            folder = tempfile.mkdtemp(prefix="codemode-monty-", dir=base)
            break
    else:
        raise ConfinementError(f"{real} is out of the worker user's reach and no temporary directory is in it")
    os.chmod(folder, 0o755)  # mkdtemp made it 0700, root's own: nobody could have put anything in it
    copy = os.path.join(folder, "monty")
    shutil.copyfile(real, copy)
    os.chmod(copy, 0o755)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return copy


def _others_can_run(path: str) -> bool:
    """Whether a user who is neither owner nor group may reach ``path`` (search every directory above it)
    and run it (a directory: search it)."""
    chain = [os.path.abspath(path)]
    while chain[-1] != "/":
        chain.append(os.path.dirname(chain[-1]))
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in chain)


def monty_files(real: str) -> list[str]:
    """``real`` and the files its loader opens: what Landlock must leave a process that runs it."""
    return [real, *_loader_files(real)]


def _loader_files(real: str) -> list[str]:
    """The shared libraries the loader opens for ``real`` (``ldd``), and its cache."""
    import subprocess  # only when the plan is built

    try:
        done = subprocess.run(["ldd", real], capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfinementError(f"cannot list {real}'s shared libraries with ldd: {exc}") from None
    if done.returncode != 0:
        if "not a dynamic executable" in done.stdout + done.stderr:
            return []
        raise ConfinementError(f"ldd {real} failed: {done.stderr.strip()[:200]}")
    files = [LOADER_CACHE] if os.path.exists(LOADER_CACHE) else []
    for line in done.stdout.splitlines():
        words = line.split()
        if "=>" in words:
            words = words[words.index("=>") + 1 :]
        if words and words[0].startswith("/"):
            files.append(words[0])
        elif "not found" in line:
            raise ConfinementError(f"{real} needs a library the loader cannot find: {line.strip()}")
    return files
