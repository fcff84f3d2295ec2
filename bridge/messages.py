"""The host <-> worker protocol: every frame either side sends, typed, and one builder per frame.

A worker holds many runtimes of one tenant (each cell's, named by ``rt``: the cell id) and runs one
guest at a time.  Each exchange with a runtime is strict ping-pong, which keeps both sides simple:

    worker -> host    ready    (once, after start-up)
    host  -> worker   run      (code, limits, guest config, leg budget)
    worker -> host    idle     (new guest requests, cancelled timers, new output) ... guest is blocked
                      + one raw frame per request (its JSON arguments), then the output's raw frames
    host  -> worker   settle   (replies, leg budget)                                  ... guest resumes
    worker -> host    idle | done (+ the output's raw frames, then the value's or the error's text)
    host  -> worker   drop     (the host ended a blocked cell: free its runtime; no answer)
    host  -> worker   dump     (write out a blocked runtime's state)
    worker -> host    snapshot + one raw frame: the state's bytes, which the host never decodes
    host  -> worker   restore  + one raw frame: a dumped state, taken up in a fresh engine (as ``run``:
                      answered by idle or done)

Between an ``idle`` and the next ``settle`` of one runtime, other runtimes of the worker may run.
Cancelling a running cell kills its worker only when no other cell's runtime lives there: a guest
stuck in native code could not obey anything else.
Reply payloads travel as raw frames of JSON text after their ``settle`` frame, so the worker hands
them to the guest's ``JSON.parse`` without decoding them.

Guest data never travels inside a worker's frame either: a request's arguments, each output entry,
the final value and an error's text follow the frame as raw frames, which the host counts and keeps
encoded.  So a worker's own frames (*control frames*) are small: at most ``CONTROL_FRAME_BYTES`` bytes
holding at most ``CONTROL_FRAME_VALUES`` JSON values, both checked on the bytes before the host
decodes one (``bridge.received``), since the worker may be owned by an attacker.

Frames are plain dicts on the wire and in memory (TypedDicts cost nothing per frame); both sides
build them only through the functions below and read them by the keys typed here, so a field name
lives in this module alone and mypy checks every use.
"""

# No ``from __future__ import annotations``: TypedDict must see ``NotRequired`` at class creation
# for ``__required_keys__`` to be right (tests compare real frames against it).
from typing import Any, Literal, NotRequired, TypedDict

#: Failure phases, as in the cell envelope.
Phase = Literal["input", "guest", "bridge", "host"]


#: Bytes of one control frame a worker may write.  The largest honest one is an idle frame of a full
#: burst: 1,024 requests (``maxQueuedRequests``) and up to 4,096 cancelled timers (``max_pending_requests``'
#: cap), about 70 KiB; its guest data travels in raw frames.
CONTROL_FRAME_BYTES = 256 * 1024
#: JSON values in one control frame: that burst is about 3 per request and 1 per cancel, 7,200 in all.
CONTROL_FRAME_VALUES = 16 * 1024


# ---- host -> worker ----------------------------------------------------------------------------


SandboxMode = Literal["strict", "auto", "off"]


class SandboxOptions(TypedDict, total=False):
    """How a worker confines itself before its first cell (``guest_runtime.confinement``)."""

    mode: SandboxMode  # strict: every layer or no start; auto: every layer the kernel offers; off: none
    uid: int  # the uid and gid to switch to (only a process started as root can); absent: keep its own
    gid: int
    seccomp_bpf: str  # the system-call filter, base64 BPF built by the service; absent: see seccomp_missing
    seccomp_missing: str  # why the service could not build one
    # A worker that runs Python cells (``confinement.python_cells_profile``): its filter instead of
    # seccomp_bpf, the ``monty`` binary it starts as its child, and the files that child's loader opens.
    python_seccomp_bpf: str
    monty_binary: str
    monty_files: list[str]


#: The worker's start-up environment may name this; only the tests' ``start_worker(test_payload=...)``
#: sets it (see ``guest_runtime.worker``): a production worker refuses to start with it.
TEST_PAYLOAD_VARIABLE = "CODEMODE_WORKER_TEST_PAYLOAD"


class WorkerOptions(TypedDict, total=False):
    """The worker's start-up argument (one JSON text on its command line), not a frame."""

    frame_cap: int  # bytes of one frame either way
    rlimit_as_bytes: int  # RLIMIT_AS; 0: none
    rlimit_cpu_seconds: int  # RLIMIT_CPU; 0: none (the worker retires itself at 80 % of it)
    stack_bytes: int  # the guest engine's stack
    sandbox: SandboxOptions  # absent: auto, keeping the uid
    python: bool  # runs Python cells: loads Monty before it confines itself (absent: True)
    monty_cpu: int  # the CPU its Monty child and client threads run on (absent: wherever the kernel puts them)


class GuestCaps(TypedDict):
    """The caps both engines hold a cell's requests to in the guest, before a request exists.

    The host sends every key; an engine reading a config that leaves one out uses the default of
    ``guest_runtime.guest_config``, where these keys, their defaults and the rule that reads them live.
    """

    maxRequestBytes: int  # JSON arguments of one guest request; larger calls reject in the guest
    maxQueuedRequests: int  # requests one synchronous burst may queue; more reject in the guest
    maxPendingRequests: int  # requests (tool calls, timers, yields) pending at once; RangeError over it
    maxQueuedBytes: int  # argument characters one synchronous burst may carry; RangeError over it
    maxRequestValues: int  # JSON values of one guest request's arguments; RangeError over it


class GuestTools(TypedDict):
    """What the guest's globals are built from: the cell's tool handles and MCP servers."""

    tools: list[dict[str, Any]]  # handle metadata: callableName, toolName, description, source, ...
    mcp: list[dict[str, Any]]  # MCP servers: {identifier, serverName, tools: [tool identifiers]}
    mcpUnavailable: NotRequired[list[dict[str, Any]]]  # configured servers that are down: {identifier, serverName}


class GuestConfig(GuestTools, GuestCaps):
    """What the prelude needs for one cell: its globals' tools and servers, and its caps."""


#: The languages a cell may be written in: QuickJS runs JavaScript, Monty runs Python.
Language = Literal["javascript", "python"]
LANGUAGES: tuple[Language, ...] = ("javascript", "python")


class RunFrame(TypedDict):
    """Start one cell in a fresh engine; ``budget_ms`` is the first leg's."""

    t: Literal["run"]
    cell_id: str  # also the runtime's name (``rt``) in later frames
    code: str
    budget_ms: int
    memory_limit_bytes: int
    max_output_bytes: int
    value_capture_bytes: int  # bytes of the final value's JSON the worker captures
    config: GuestConfig
    language: NotRequired[Language]  # absent: "javascript"


class ReplyError(TypedDict):
    """How a refused or failed guest request rejects in the guest."""

    message: str
    code: NotRequired[str]
    name: NotRequired[str]


class Reply(TypedDict):
    """One settled guest request; an ``ok`` one's payload follows the settle frame as a raw frame."""

    id: int
    ok: bool
    error: NotRequired[ReplyError]  # when not ok


class SettleFrame(TypedDict):
    """Replies for the blocked guest, then run on for ``budget_ms``.

    Followed by one raw frame per ``ok`` reply, in order: the reply's JSON text as UTF-8 bytes, so
    payloads of many megabytes cross the pipe without being escaped into a JSON string.
    """

    t: Literal["settle"]
    rt: str  # the runtime (cell id) the replies are for
    budget_ms: int
    replies: list[Reply]


class DropFrame(TypedDict):
    """Free a blocked runtime the host ended (cancel, expiry, a refused park); unknown ones are ignored."""

    t: Literal["drop"]
    rt: str


class DumpFrame(TypedDict):
    """Write out a blocked runtime's state (answered by a ``snapshot`` frame); the runtime stays as it is."""

    t: Literal["dump"]
    rt: str


class RestoreFrame(TypedDict):
    """Take up a cell another process dumped, in a fresh engine; its state follows as one raw frame.

    Answered as a ``run`` is: an ``idle`` frame (no new requests; it waits on those it awaited when
    dumped), or a ``done`` frame when the state cannot be taken up.
    """

    t: Literal["restore"]
    cell_id: str
    memory_limit_bytes: int
    max_output_bytes: int
    value_capture_bytes: int
    config: GuestConfig
    language: Language


# ---- worker -> host ----------------------------------------------------------------------------


class SnapshotFrame(TypedDict):
    """A ``dump``'s answer: one raw frame follows, the runtime's state (``size`` bytes; empty when refused)."""

    t: Literal["snapshot"]
    rt: str
    size: int
    refused: NotRequired[str]  # why the runtime cannot be dumped (a JavaScript cell)
    # Set by the host's reader from the raw frame, never sent:
    state: NotRequired[bytes]


class SandboxReport(TypedDict):
    """The confinement layers a process put in force, and why each missing one is missing."""

    mode: SandboxMode
    layers: list[str]  # in force, in the order they were applied
    missing: dict[str, str]  # layer -> why it is not in force


class ReadyFrame(TypedDict):
    t: Literal["ready"]
    pid: int
    sandbox: SandboxReport  # sent after confinement: no guest byte has reached the worker yet


class GuestRequest(TypedDict):
    """One host request the guest started (tool call, timer, yield, store access, ...)."""

    id: int
    method: str
    # Its JSON argument array, as the guest wrote it: not in the frame but in the raw frame that follows
    # it (one per request, in order); the host's reader puts the bytes here, still encoded.
    args: NotRequired[bytes]


class OutputShipment(TypedDict):
    """The output entries that follow a frame as raw frames (``bridge.output.OutputCapture.ship``).

    ``entries`` raw frames each hold one whole entry's compact JSON; then, with ``cut``, one raw frame
    holds a prefix of the next entry, whose whole JSON is ``cut`` bytes; ``counted`` is
    ``[bytes, entries]`` of output past the capture allowance, of which only the size travels.
    """

    entries: int
    cut: NotRequired[int]
    counted: NotRequired[list[int]]


class IdleFrame(TypedDict):
    """The guest is blocked on host work; one raw frame per request follows (its JSON arguments),
    then the output's raw frames (``output``).

    Arguments travel as raw frames so that neither side decodes them on the way: the host keeps
    them as bytes, counts and charges them, and parses them only for a handler that needs objects.
    """

    t: Literal["idle"]
    rt: str
    requests: list[GuestRequest]
    cancels: list[int]  # request ids the guest no longer awaits (cleared timers)
    output: OutputShipment
    outstanding: int
    cpu_ms: float
    heap_bytes: int
    # Set by the host's reader from the raw frames (``bridge.received``), never sent:
    shipped: NotRequired[list[dict[str, Any]]]  # the output source items (``bridge.output``)


class GuestFailure(TypedDict):
    text: str
    phase: Phase
    code: str


class FailureHead(TypedDict):
    """A failure as a done frame carries it: its text follows as the last raw frame."""

    phase: Phase
    code: str


class DoneFrame(TypedDict):
    """The cell ended in the worker: ``value`` when ok, else ``error``.

    The output's raw frames follow it, then one raw frame: the value's JSON (a prefix of it when
    shorter than ``value`` bytes), or the error's text.
    """

    t: Literal["done"]
    rt: str
    ok: bool
    value: NotRequired[int]  # ok: bytes of the value's whole JSON
    error: NotRequired[FailureHead]
    output: OutputShipment
    cancels: list[int]  # timers dropped because nobody awaited them
    cpu_ms: float
    heap_bytes: int
    recycle: bool  # the worker must take no new cell (limit hit, engine fault); it ends when its table is empty
    # Set by the host's reader from the raw frames (``bridge.received``), never sent:
    shipped: NotRequired[list[dict[str, Any]]]  # the output source items (``bridge.output``)
    text: NotRequired[str]  # the value's JSON (or its prefix) or the error's text


HostFrame = RunFrame | SettleFrame | DropFrame | DumpFrame | RestoreFrame
WorkerFrame = ReadyFrame | IdleFrame | DoneFrame | SnapshotFrame


# ---- builders ----------------------------------------------------------------------------------


def run_frame(
    *,
    cell_id: str,
    code: str,
    budget_ms: int,
    memory_limit_bytes: int,
    max_output_bytes: int,
    value_capture_bytes: int,
    config: GuestConfig,
    language: Language = "javascript",
) -> RunFrame:
    frame: RunFrame = {
        "t": "run",
        "cell_id": cell_id,
        "code": code,
        "budget_ms": budget_ms,
        "memory_limit_bytes": memory_limit_bytes,
        "max_output_bytes": max_output_bytes,
        "value_capture_bytes": value_capture_bytes,
        "config": config,
    }
    if language != "javascript":
        frame["language"] = language  # the JavaScript frame stays as it was
    return frame


def settle_frame(rt: str, budget_ms: int, replies: list[Reply]) -> SettleFrame:
    return {"t": "settle", "rt": rt, "budget_ms": budget_ms, "replies": replies}


def drop_frame(rt: str) -> DropFrame:
    return {"t": "drop", "rt": rt}


def dump_frame(rt: str) -> DumpFrame:
    return {"t": "dump", "rt": rt}


def snapshot_frame(rt: str, size: int, refused: str | None = None) -> SnapshotFrame:
    frame: SnapshotFrame = {"t": "snapshot", "rt": rt, "size": size}
    if refused is not None:
        frame["refused"] = refused
    return frame


def restore_frame(
    *,
    cell_id: str,
    memory_limit_bytes: int,
    max_output_bytes: int,
    value_capture_bytes: int,
    config: GuestConfig,
    language: Language,
) -> RestoreFrame:
    return {
        "t": "restore",
        "cell_id": cell_id,
        "memory_limit_bytes": memory_limit_bytes,
        "max_output_bytes": max_output_bytes,
        "value_capture_bytes": value_capture_bytes,
        "config": config,
        "language": language,
    }


def ready_frame(pid: int, sandbox: SandboxReport) -> ReadyFrame:
    return {"t": "ready", "pid": pid, "sandbox": sandbox}


def idle_frame(
    *,
    rt: str,
    requests: list[GuestRequest],
    cancels: list[int],
    output: OutputShipment,
    outstanding: int,
    cpu_ms: float,
    heap_bytes: int,
) -> IdleFrame:
    return {
        "t": "idle",
        "rt": rt,
        "requests": requests,
        "cancels": cancels,
        "output": output,
        "outstanding": outstanding,
        "cpu_ms": cpu_ms,
        "heap_bytes": heap_bytes,
    }


def done_frame(
    *,
    rt: str,
    value: int | None = None,
    error: FailureHead | None = None,
    output: OutputShipment,
    cancels: list[int],
    cpu_ms: float,
    heap_bytes: int,
    recycle: bool,
) -> DoneFrame:
    """A completed cell when ``error`` is None (then ``value`` is its JSON's size), else a failed one."""
    frame: DoneFrame = {
        "t": "done",
        "rt": rt,
        "ok": error is None,
        "output": output,
        "cancels": cancels,
        "cpu_ms": cpu_ms,
        "heap_bytes": heap_bytes,
        "recycle": recycle,
    }
    if error is None:
        assert value is not None, "a completed cell's done frame carries its value's size"
        frame["value"] = value
    else:
        frame["error"] = error
    return frame


def guest_failure(text: str, phase: Phase, code: str) -> GuestFailure:
    return {"text": text, "phase": phase, "code": code}


def failure_head(failure: GuestFailure) -> FailureHead:
    return {"phase": failure["phase"], "code": failure["code"]}
