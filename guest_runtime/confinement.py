"""Kernel confinement of a process that parses hostile bytes: the guest worker and the JSON body decoder.

The interpreter (QuickJS in a worker, the JSON decoder in the body helper) is the first wall.  This
module is the second, for the day a memory bug in the first gives an attacker native code in the
process.  ``confine`` runs once per process, after every import and set-up step and before the first
hostile byte is read, so no cell pays for it.  Its layers, in the order they are applied (each needs
something the later ones take away):

``fds``           every file descriptor but the ones kept (the channel, the stderr pipe) is closed
``network``       a new network namespace, whose only interface is a loopback that is down
                  (as root: ``unshare(CLONE_NEWNET)``; otherwise inside a new user namespace)
``capabilities``  ambient set emptied, and the bounding set where the process may change it (root,
                  or in its own user namespace; elsewhere it holds no capability and, with
                  no_new_privs, can never gain one), then effective, permitted and inheritable
``uid``           (started as root) no supplementary groups, then the worker user's gid and uid
``not_dumpable``  ``PR_SET_DUMPABLE`` 0: no core dump, no ptrace by the same uid, /proc entries root's
``no_new_privs``  ``PR_SET_NO_NEW_PRIVS``: nothing could ever gain privileges through exec
``landlock``      a ruleset handling every file-system right (TCP and scopes too, where the ABI has
                  them) with no rule at all: no path can be opened, made, removed or run (a
                  ``Profile`` may name files left readable and executable: the Monty launcher's)
``rlimits``       ``RLIMIT_NOFILE`` just above the highest kept fd, ``RLIMIT_NPROC`` 0
``seccomp``       the system-call allowlist below, built by libseccomp (``seccomp_program``)

Modes: ``off`` applies nothing; ``auto`` applies every layer the kernel offers and records why a
missing one is missing; ``strict`` refuses to run with one missing.  In both, a layer the kernel
offers but that fails (a namespace limit reached, no memory) stops the start: a worker never runs
with fewer layers than its siblings.  Namespaces, capabilities and Landlock act on the calling
thread only, so a process with more than one thread is refused.

The filter is built once per service (libseccomp's Python binding loads slowly: it runs
``ldconfig`` twice) and handed to each process as BPF, which it loads with one ``prctl``.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import functools
import os
import resource
import stat
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, NamedTuple

from .errors import ConfinementError

if TYPE_CHECKING:  # annotations only: the Monty launcher imports this module on every worker start
    from bridge.messages import SandboxOptions, SandboxReport

LAYERS = (
    "fds",
    "network",
    "capabilities",
    "uid",
    "not_dumpable",
    "no_new_privs",
    "landlock",
    "rlimits",
    "seccomp",
)

# ---- the system-call allowlist ---------------------------------------------------------------
# What the job loop does once it serves cells: read and write its pipes, allocate (the engine's
# heap and Python's), wait on futexes, read clocks and its CPU time, handle signals, exit.

ALLOWED = (
    "read",
    "write",
    "readv",
    "writev",
    "close",
    "brk",
    "munmap",
    "mremap",
    "madvise",
    "futex",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "clock_nanosleep",
    "nanosleep",
    "getrusage",
    "getpid",
    "gettid",
    "getrandom",
    "sched_yield",
    "restart_syscall",
    "exit",
    "exit_group",
)
#: Allowed only without ``PROT_EXEC``: no new executable memory (the code the process runs is mapped).
NOT_EXECUTABLE = ("mmap", "mprotect")
PROT_EXEC = 0x4
#: Only the calls no Python or libc error path ever makes, only an exploit: they kill the process
#: (SIGSYS), which stops an attacker's probing at the first try and shows up in the service's log as
#: a worker "killed by SIGSYS".  Every other call off the allowlist fails with EPERM instead, which
#: a Python error path (a file it cannot open, a fork it cannot make) turns into a clean error.
KILLED = (
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "setns",
    "unshare",
    "open_by_handle_at",
    "name_to_handle_at",
    "keyctl",
    "add_key",
    "request_key",
    "iopl",
    "ioperm",
    "reboot",
    "swapon",
    "swapoff",
)


#: One filter rule in plain data, so a rule set can be hashed (the Monty launcher caches its BPF by it):
#: (action, system call, argument conditions).  Actions: ``allow``, ``kill`` (the whole process),
#: ``enosys`` (fail as if the kernel lacked the call); every call without a rule fails with EPERM.
#: A condition is libseccomp's (argument index, operator, a, b): ``eq`` holds when the argument is a,
#: ``masked_eq`` when the argument AND a is b.
Condition = tuple[int, str, int, int]
Rule = tuple[str, str, tuple[Condition, ...]]

_NO_EXEC: Condition = (2, "masked_eq", PROT_EXEC, 0)
#: Reading its own limits only (resource.getrlimit): raising a soft limit to the hard one is refused.
READ_OWN_LIMITS: tuple[Condition, ...] = ((0, "eq", 0, 0), (2, "eq", 0, 0))
#: The guest worker's and the body helper's filter.
PYTHON_RULES: tuple[Rule, ...] = (
    *(("allow", name, ()) for name in ALLOWED + ("getrlimit",)),
    *(("allow", name, (_NO_EXEC,)) for name in NOT_EXECUTABLE),
    ("allow", "prlimit64", READ_OWN_LIMITS),
    *(("kill", name, ()) for name in KILLED),
)


# ---- a worker that runs Python cells ----------------------------------------------------------
# Its Monty client starts one ``monty subprocess`` child (posix_spawn: a vfork-style clone, dup2, execve)
# and talks to it over pipes from a tokio runtime (threads, epoll, an eventfd, a pidfd, wait4, kill).  The
# child inherits this filter and adds nothing, so it also holds what the child's own start needs (the
# loader's openat/mmap of its libraries executable, Rust's runtime start: ``monty_launcher`` measured
# them).  Landlock bounds what openat and execve reach: the monty binary and its libraries only.

CLONE_VM = 0x100
CLONE_VFORK = 0x4000
CLONE_THREAD = 0x10000
SIGCHLD = 17
PR_SET_NAME = 15
#: What a ``monty subprocess`` process calls as it starts (measured with strace on 1.4): the loader
#: (Landlock leaves it the binary, its libraries and ld.so.cache), Rust's runtime start.  Its own filter
#: (``monty_launcher``) and a Python-cells worker's (its child inherits it) both allow them.
MONTY_START = (
    "execve",
    "openat",
    "newfstatat",
    "fstat",
    "access",
    "pread64",
    "arch_prctl",
    "set_tid_address",
    "set_robust_list",
    "rseq",
    "poll",
    "ppoll",
    "sched_getaffinity",
)
_SPAWN = (
    *ALLOWED,
    *NOT_EXECUTABLE,  # without their PROT_EXEC condition: the child's loader maps its libraries executable
    *MONTY_START,
    "getrlimit",
    "lseek",
    "pipe2",
    "dup2",
    "dup3",
    "fcntl",
    "ioctl",
    "socketpair",
    "eventfd2",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "pidfd_open",
    "wait4",
    "waitid",
    # Signals reach only processes of this Landlock domain (its scope), i.e. the worker's own child.
    "kill",
    "pidfd_send_signal",
)
PYTHON_CELL_RULES: tuple[Rule, ...] = (
    *(("allow", name, ()) for name in _SPAWN),
    ("allow", "prlimit64", READ_OWN_LIMITS),
    ("allow", "prctl", ((0, "eq", PR_SET_NAME, 0),)),  # naming threads
    # Pinning the calling thread only (pid 0): the worker places its Monty client on its child's CPU.
    ("allow", "sched_setaffinity", ((0, "eq", 0, 0),)),
    # Threads, and the one process shape posix_spawn makes (it then execs at once); clone3 carries its
    # flags in memory, which seccomp cannot read: it fails as if missing, and glibc falls back to clone.
    ("allow", "clone", ((0, "masked_eq", CLONE_THREAD, CLONE_THREAD),)),
    ("allow", "clone", ((0, "eq", CLONE_VM | CLONE_VFORK | SIGCHLD, 0),)),
    ("enosys", "clone3", ()),
    *(("kill", name, ()) for name in KILLED if name != "execve"),
)


def seccomp_program() -> tuple[str, str]:
    """``(bpf, "")``: the workers' filter as base64 BPF for this machine's architecture; or ``("", why not)``.

    Built once per process that starts confined ones (the service); pure, so it is cached.
    """
    return build_filter(PYTHON_RULES)


@functools.cache
def build_filter(rules: tuple[Rule, ...]) -> tuple[str, str]:
    """``(bpf, "")``: ``rules`` as base64 BPF for this machine's architecture; or ``("", why not)``."""
    try:
        import pyseccomp as lib
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: the binding found no libseccomp
        return "", f"libseccomp cannot be loaded ({exc}); install libseccomp2"
    actions = {"allow": lib.ALLOW, "kill": lib.KILL_PROCESS, "enosys": lib.ERRNO(errno.ENOSYS)}
    operators = {"eq": lib.EQ, "masked_eq": lib.MASKED_EQ}
    try:
        bpf = lib.SyscallFilter(lib.ERRNO(errno.EPERM))
        # A call through another ABI (int 0x80 on x86_64) would dodge the rules: it kills the process.
        bpf.set_attr(lib.Attr.ACT_BADARCH, lib.KILL_PROCESS)
        for action, name, conditions in rules:
            number = lib.resolve_syscall(lib.Arch.NATIVE, name)
            if number >= 0:  # a call this architecture lacks (getrlimit on arm64) needs no rule
                args = [lib.Arg(index, operators[op], value, mask) for index, op, value, mask in conditions]
                bpf.add_rule(actions[action], number, *args)
        with open(os.memfd_create("codemode-seccomp"), "w+b") as out:
            bpf.export_bpf(out)
            out.seek(0)
            return base64.b64encode(out.read()).decode("ascii"), ""
    except OSError as exc:
        return "", f"libseccomp could not build the filter ({exc})"


# ---- the kernel interfaces, through libc -------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# The generic numbers: x86_64 and arm64 alike.
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
#: LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE: the rights a rule of a Profile grants.
READ_AND_EXECUTE = 1 << 0 | 1 << 2

_FD_LIMIT = 2**31 - 1
#: Errors that mean "this kernel (or this process's privilege) does not offer the layer".
NOT_OFFERED = (errno.EPERM, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EACCES)


class _Refused(Exception):
    """A layer the kernel does not offer here; the text says why.  A signal, not a failure: ``confine``
    catches it and records the layer as missing (or, in strict mode, raises ConfinementError)."""


def _check(result: int, what: str) -> int:
    if result == -1:
        code = ctypes.get_errno()
        if code in NOT_OFFERED:
            raise _Refused(f"{what}: {os.strerror(code)}")
        raise ConfinementError(f"{what} failed: {os.strerror(code)}")
    return result


def _prctl(option: int, arg: int | ctypes.c_void_p = 0, what: str = "prctl") -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), what)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct landlock_path_beneath_attr is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# ---- the layers --------------------------------------------------------------------------------


class Profile(NamedTuple):
    """What differs between the processes confined here.  The default is the guest worker's and the
    body helper's; the Monty launcher (``monty_launcher``) passes its own, then execs."""

    #: Files still readable and executable under Landlock (a program to exec and what its loader
    #: opens); none: no path at all.
    run_files: tuple[str, ...] = ()
    #: Descriptors allowed above the highest kept one (a loader opens its libraries one at a time).
    spare_fds: int = 0
    #: ``RLIMIT_NPROC``; ``None`` leaves it (a process that starts a thread needs one; its seccomp
    #: filter then refuses every new process instead).
    max_processes: int | None = 0


WORKER_PROFILE = Profile()


def python_cells_profile(monty_files: tuple[str, ...]) -> Profile:
    """The profile of a worker that runs Python cells: it may run the ``monty`` binary (``monty_files``: it
    and what its loader opens) as its one child, and start threads (its Monty client's, the child's)."""
    return Profile(run_files=monty_files, spare_fds=32, max_processes=None)


def confine(options: SandboxOptions, keep_fds: Collection[int], profile: Profile = WORKER_PROFILE) -> SandboxReport:
    """Put the layers in force (see the module text); return which are and why the others are not.

    Raises ``ConfinementError`` when the mode demands a layer that cannot be had.
    """
    mode = options.get("mode", "auto")
    if mode == "off":
        return {"mode": mode, "layers": [], "missing": {layer: "sandbox is off" for layer in LAYERS}}
    threads = _threads()
    if threads > 1:
        raise ConfinementError(f"the process runs {threads} threads; it can only confine itself single-threaded")
    steps: list[tuple[str, Callable[[], None]]] = [
        ("fds", lambda: _close_fds(keep_fds)),
        ("network", _new_network),
        ("capabilities", _drop_capability_sets),
        ("uid", lambda: _switch_user(options)),
        ("capabilities", _clear_capabilities),
        ("not_dumpable", lambda: _prctl(PR_SET_DUMPABLE, 0, what="PR_SET_DUMPABLE")),
        ("no_new_privs", lambda: _prctl(PR_SET_NO_NEW_PRIVS, 1, what="PR_SET_NO_NEW_PRIVS")),
        ("landlock", lambda: _landlock(profile.run_files)),
        ("rlimits", lambda: _limit_resources(keep_fds, profile)),
        ("seccomp", lambda: _load_filter(options)),
    ]
    missing: dict[str, str] = {}
    for layer, step in steps:
        if layer in missing:
            continue
        try:
            step()
        except (_Refused, OSError) as exc:  # OSError: from os.* and resource.* calls
            if isinstance(exc, OSError) and exc.errno not in NOT_OFFERED:
                raise ConfinementError(f"the {layer} layer failed: {exc}") from None
            if mode == "strict":
                raise ConfinementError(f'sandbox = "strict" and the {layer} layer is not available: {exc}') from None
            missing[layer] = str(exc)
    return {"mode": mode, "layers": [layer for layer in LAYERS if layer not in missing], "missing": missing}


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1  # no /proc: the seccomp filter is loaded for this thread; nothing else is known to run


def pipe_fds() -> set[int]:
    """This process's open descriptors that are pipes or sockets (a helper's channel to its parent)."""
    kept = set()
    for name in _open_fds():
        try:
            mode = os.fstat(name).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            kept.add(name)
    return kept


def _open_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(resource.getrlimit(resource.RLIMIT_NOFILE)[0]))


def _close_fds(keep: Collection[int]) -> None:
    low = 0
    for fd in [*sorted(set(keep)), _FD_LIMIT]:
        # One close_range(2) per gap, however high the descriptor limit.  Never an empty gap:
        # CPython 3.11 turns closerange(0, 0) into close_range(0, ~0), which closes everything.
        if low < fd:
            os.closerange(low, fd)
        low = fd + 1


def _new_network() -> None:
    if os.geteuid() == 0:
        _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        return
    # Without privilege the kernel grants a network namespace only inside a user namespace of one's own.
    if _sysctl("/proc/sys/user/max_user_namespaces") == 0:
        raise _Refused("user namespaces are disabled (user.max_user_namespaces = 0)")
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(CLONE_NEWUSER | CLONE_NEWNET)")


def _sysctl(path: str) -> int | None:
    try:
        with open(path, "rb") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _drop_capability_sets() -> None:
    """Empty the ambient and bounding sets (the latter needs CAP_SETPCAP: root, or a new user namespace)."""
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, what="PR_CAP_AMBIENT_CLEAR_ALL")
    last = _sysctl("/proc/sys/kernel/cap_last_cap") or 40
    for cap in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 and ctypes.get_errno() != errno.EINVAL:
            if _capabilities_held():
                raise _Refused(f"PR_CAPBSET_DROP: {os.strerror(ctypes.get_errno())}")
            return  # holding no capability, the process could gain none (no_new_privs, no exec)


def _capabilities_held() -> bool:
    data = (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), data), "capget")
    return any(d.effective or d.permitted or d.inheritable for d in data)


def _clear_capabilities() -> None:
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), data), "capset")


def _switch_user(options: SandboxOptions) -> None:
    uid, gid = options.get("uid"), options.get("gid")
    if os.geteuid() != 0:
        raise _Refused("the service does not run as root, and only root can start workers under another uid")
    if uid is None or gid is None:
        raise _Refused("no worker user was given")
    if uid == 0:
        raise ConfinementError("the worker user must not be root")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _landlock(run_files: Collection[str]) -> None:
    abi = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 1:
        raise _Refused(f"the kernel has no Landlock ({os.strerror(ctypes.get_errno())})")
    # Every right of the ABI the kernel speaks: read/write/execute/make/remove (1), refer (2),
    # truncate (3), TCP bind/connect (4), device ioctl (5), abstract unix sockets and signals (6).
    fs = (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
    attr = _RulesetAttr(fs, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _check(
        _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    try:
        for path in run_files:
            _allow_file(ruleset, path)
        _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _allow_file(ruleset: int, path: str) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)  # the file a symlink names: rules bind inodes
    try:
        rule = _PathBeneath(READ_AND_EXECUTE, fd)
        if _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0) == -1:
            # Not a missing layer (the kernel made the ruleset): a process must not run without it.
            raise ConfinementError(f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def _limit_resources(keep_fds: Collection[int], profile: Profile) -> None:
    files = max(keep_fds, default=2) + 1 + profile.spare_fds
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    if profile.max_processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (profile.max_processes, profile.max_processes))


def _load_filter(options: SandboxOptions) -> None:
    program = options.get("seccomp_bpf", "")
    if not program:
        raise _Refused(options.get("seccomp_missing") or "the service passed no seccomp filter")
    code = base64.b64decode(program)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "PR_SET_SECCOMP")
