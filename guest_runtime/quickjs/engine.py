"""The one module that talks to QuickJS (PyPI ``quickjs-ng``, whose C extension is ``_quickjs``).

``GuestEngine`` is one fresh runtime + context with the prelude loaded: the ``Engine`` of JavaScript
and TypeScript cells (``guest_runtime/engine.py``).  A slice calls the cell (or settles the host's
replies), pumps its jobs under a deadline, then takes what the prelude queued (requests, cancels,
output and the cell's outcome, one JSON text: the binding hands over strings, not objects) and tells
the driver what happened as a ``Slice``.  Engine exceptions are translated into
``guest_runtime.errors`` here and nowhere else.

What the binding does not expose (the rejection tracker, the interrupt handler, precompiled
bytecode, the C plain-data check of ``plain_check.py``) is wired through ctypes on the runtime and
context pointers of its Context object; ``quickjs-ng`` is pinned, and ``check_engine()`` proves the
wiring at worker start, so a binding change fails loudly instead of silently.

The extension is used directly, not through the package's ``quickjs`` wrapper: importing that
starts a thread pool thread (for its ``Function`` helper, which we never use), and a worker must
be single-threaded when it confines itself (``confinement.py``: namespaces, capabilities and
Landlock apply to the calling thread only).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import _quickjs

from bridge.jsoncodec import loads, well_formed, well_formed_str

from ..engine import Failed, SettledReply, Slice
from ..errors import EngineFault, GuestFault, GuestSyntaxError, GuestTimeout
from ..heap_trim import give_back_memory
from . import plain_check, prelude_source
from .cell_stacks import first_line, syntax_error
from .outcome import BridgeRejection, Taken, slice_of
from .prelude_source import PreludeSource
from .typescript import read_cell

# ---- unhandled rejection tracking --------------------------------------------------------------


class _JSValue(ctypes.Structure):
    _fields_ = [("u", ctypes.c_uint64), ("tag", ctypes.c_int64)]


_TRACKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, _JSValue, _JSValue, ctypes.c_bool, ctypes.c_void_p)
_lib = ctypes.CDLL(_quickjs.__file__)
_lib.JS_SetHostPromiseRejectionTracker.argtypes = [ctypes.c_void_p, _TRACKER, ctypes.c_void_p]
_lib.JS_SetHostPromiseRejectionTracker.restype = None
_lib.JS_ToCStringLen2.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), _JSValue, ctypes.c_bool]
_lib.JS_ToCStringLen2.restype = ctypes.c_void_p
_lib.JS_FreeCString.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_lib.JS_FreeCString.restype = None
#: The binding's Context object starts with PyObject_HEAD, then ``JSRuntime *runtime``.
_RUNTIME_OFFSET = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)

#: JSContext pointer -> (promise pointer -> reason text).  A worker holds many parked engines, so
#: each engine's rejections are kept apart by the context the engine reports them from.
_unhandled: dict[int, dict[int, str]] = {}
#: JSContext pointer -> the promise pointer of the first rejection reported while the engine
#: rejects a bridge promise (``GuestEngine.settle``); 0 while it waits for one.
_bridge_watch: dict[int, int] = {}


def _on_rejection(ctx: int, promise: _JSValue, reason: _JSValue, handled: bool, _opaque: int) -> None:
    table = _unhandled.setdefault(ctx or 0, {})
    if handled:
        table.pop(promise.u, None)
        return
    if _bridge_watch.get(ctx) == 0:
        # Taken before the reason's text: String(reason) may run cell code, which may reject more.
        _bridge_watch[ctx] = promise.u
    table[promise.u] = _js_text(ctx, reason) or "unhandled promise rejection"


def _js_text(ctx: int, value: _JSValue) -> str | None:
    """``String(value)`` as well-formed text, or None if the engine could not convert it."""
    size = ctypes.c_size_t()
    ptr = _lib.JS_ToCStringLen2(ctx, ctypes.byref(size), value, False)
    if not ptr:
        return None
    # The engine writes a lone surrogate as its 3-byte (WTF-8) form: one U+FFFD, not three.
    raw = ctypes.string_at(ptr, size.value).decode("utf-8", "surrogatepass")
    _lib.JS_FreeCString(ctx, ptr)
    return well_formed_str(raw)


_tracker = _TRACKER(_on_rejection)  # module-level: the C side keeps a raw pointer to it

# ---- the deadline interrupt ----------------------------------------------------------------------
# While JS runs, QuickJS asks its runtime's interrupt handler every few thousand ticks (calls and
# backward jumps) whether to stop; a yes throws the uncatchable "interrupted" error.  The binding's
# own time limit read the process CPU clock, a system call, on every call into JS (half a
# microsecond each, four to eight calls per tool call or cell); this handler reads the monotonic
# clock only when asked, against the deadline the driver armed for the call in progress.
_INTERRUPT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_lib.JS_SetInterruptHandler.argtypes = [ctypes.c_void_p, _INTERRUPT, ctypes.c_void_p]
_lib.JS_SetInterruptHandler.restype = None
#: Every call into an engine may run at least this long, even when its cell's deadline has passed.
MIN_CALL_S = 0.001
NOT_DUMPABLE = "a JavaScript cell's heap cannot be dumped: a parked JavaScript cell lives only in its process"


class _Armed:
    """The time.monotonic() past which running JS is interrupted.

    A worker runs one call into one engine at a time; the driver arms this around each call and
    disarms it after.  Disarmed it is 0, so JS entered any other way stops when first asked.
    """

    stop_at = 0.0


def _on_interrupt(_runtime: int | None, _opaque: int | None) -> int:
    return 1 if time.monotonic() > _Armed.stop_at else 0


_interrupt = _INTERRUPT(_on_interrupt)  # module-level: the C side keeps a raw pointer to it


@contextlib.contextmanager
def _running_until(stop_at: float) -> Iterator[None]:
    """JS entered inside the block is interrupted past ``stop_at``.  For the calls made once per engine
    or cell; the per-call paths (``_call``, ``pump``) arm inline, without this generator's frame."""
    _Armed.stop_at = stop_at
    try:
        yield
    finally:
        _Armed.stop_at = 0.0


def _runtime_pointer(ctx: _quickjs.Context) -> int:
    return ctypes.c_void_p.from_address(id(ctx) + _RUNTIME_OFFSET).value or 0


def _context_pointer(ctx: _quickjs.Context) -> int:
    return ctypes.c_void_p.from_address(id(ctx) + _RUNTIME_OFFSET + ctypes.sizeof(ctypes.c_void_p)).value or 0


# ---- the heap size in O(1) ---------------------------------------------------------------------
# ``Context.memory()`` (JS_ComputeMemoryUsage) walks every object of the heap: read once per slice it
# made a nested call cost O(heap).  The runtime keeps the bytes its memory limit counts in a counter
# it updates on every allocation: on the pinned quickjs-ng, ``JSRuntime`` starts with its
# ``JSMallocFunctions`` (five function pointers), then ``JSMallocState {malloc_count, malloc_size,
# malloc_limit, opaque}``.  Reading that word is reading what the heap cap is checked against, not an
# estimate; ``check_engine()`` proves the offset against ``memory()`` at worker start (counts, size and
# limit, before and after an allocation and a limit change), so a binding whose layout moved refuses
# to start instead of reporting garbage.
_MALLOC_STATE_OFFSET = 5 * ctypes.sizeof(ctypes.c_void_p)
_MallocState = ctypes.c_size_t * 3  # malloc_count, malloc_size, malloc_limit


def _malloc_state(ctx: _quickjs.Context) -> Any:
    """A live view of the runtime's malloc counters; valid as long as ``ctx`` is."""
    return _MallocState.from_address(_runtime_pointer(ctx) + _MALLOC_STATE_OFFSET)


def _check_malloc_state(ctx: _quickjs.Context) -> None:
    """Raise EngineFault unless the counters read at the offset are the ones ``memory()`` reports."""
    state = _malloc_state(ctx)
    steps = ((64 << 20, "globalThis.__probe = new Array(4096).fill(1)"), (32 << 20, "delete globalThis.__probe"))
    for limit, step in steps:
        ctx.set_memory_limit(limit)
        ctx.eval(step)
        usage = ctx.memory()
        read = (state[0], state[1], state[2])
        if read != (usage["malloc_count"], usage["malloc_size"], usage["malloc_limit"]):
            raise EngineFault(
                f"the QuickJS runtime's malloc counters are not where the pinned quickjs-ng keeps them "
                f"(read {read}, memory() says {usage}); is quickjs-ng the pinned version?"
            )


# ---- precompiled prelude -----------------------------------------------------------------------
# Parsing the prelude costs ~1.7 ms per context; loading its bytecode ~0.3 ms.  The bytecode is
# compiled once per worker process, in this process, so it is trusted input for JS_ReadObject.
_JS_TAG_EXCEPTION = 6
_EVAL_COMPILE_ONLY = 1 << 5
_WRITE_BYTECODE_STRIPPED = (1 << 0) | (1 << 4) | (1 << 5)  # bytecode, no source, no debug info
_READ_BYTECODE = 1 << 0
_lib.JS_Eval.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int]
_lib.JS_Eval.restype = _JSValue
_lib.JS_WriteObject.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), _JSValue, ctypes.c_int]
_lib.JS_WriteObject.restype = ctypes.c_void_p
_lib.JS_ReadObject.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
_lib.JS_ReadObject.restype = _JSValue
_lib.JS_EvalFunction.argtypes = [ctypes.c_void_p, _JSValue]
_lib.JS_EvalFunction.restype = _JSValue
_lib.JS_FreeValue.argtypes = [ctypes.c_void_p, _JSValue]
_lib.JS_FreeValue.restype = None
_lib.js_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_lib.js_free.restype = None
_lib.JS_GetException.argtypes = [ctypes.c_void_p]
_lib.JS_GetException.restype = _JSValue
_lib.JS_GetPropertyStr.argtypes = [ctypes.c_void_p, _JSValue, ctypes.c_char_p]
_lib.JS_GetPropertyStr.restype = _JSValue
_lib.JS_SetGCThreshold.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_lib.JS_SetGCThreshold.restype = None
_lib.JS_GetGCThreshold.argtypes = [ctypes.c_void_p]
_lib.JS_GetGCThreshold.restype = ctypes.c_size_t
_NO_COLLECTION = ctypes.c_size_t(-1).value
plain_check.bind(lambda name: ctypes.cast(getattr(_lib, name), ctypes.c_void_p).value or 0)
#: Reply texts from this many characters up, and from 1/HEAP_PER_REPLY_BYTE of the engine's heap up, are
#: parsed after one collection and with the collector paused (``_collected_first``): a parse makes
#: several heap bytes per byte of text, so that collection costs no more than the parse.
GC_PAUSE_BYTES = 1024 * 1024
HEAP_PER_REPLY_BYTE = 8

#: A per-process name the bytecode parks the hook under, deleted before any cell code runs.
_HOOK_SLOT = "__codemode_hook_" + os.urandom(8).hex()
_PRELUDE_AT = re.compile(r"<prelude>:(?P<line>\d+):(?P<col>\d+)")


def compile_prelude(source: PreludeSource) -> bytes:
    """Stripped bytecode of ``source``; a syntax error raises EngineFault naming the file and line.

    Stripping drops file names and lines, so every prelude frame has an empty file name: that is
    how the prelude's stack-trace guard tells its own frames from the cell's.
    """
    ctx = _quickjs.Context()
    cptr = _context_pointer(ctx)
    # The plain-data check, where install() put one, is handed to the prelude and its global deleted.
    plain = f"globalThis.{plain_check.SLOT}"
    text = f'globalThis.{_HOOK_SLOT} = ({source.text})("{_HOOK_SLOT}", {plain}); delete {plain};'.encode()
    fn = _lib.JS_Eval(cptr, text, len(text), b"<prelude>", _EVAL_COMPILE_ONLY)
    if fn.tag == _JS_TAG_EXCEPTION:
        raise EngineFault(f"the guest prelude does not compile: {_compile_error(cptr, source)}")
    size = ctypes.c_size_t()
    ptr = _lib.JS_WriteObject(cptr, ctypes.byref(size), fn, _WRITE_BYTECODE_STRIPPED)
    _lib.JS_FreeValue(cptr, fn)
    if not ptr:
        raise EngineFault("the guest prelude's bytecode could not be written")
    data = ctypes.string_at(ptr, size.value)
    _lib.js_free(cptr, ptr)
    return data


def _compile_error(cptr: int, source: PreludeSource) -> str:
    exc = _lib.JS_GetException(cptr)
    stack = _lib.JS_GetPropertyStr(cptr, exc, b"stack")
    message = _js_text(cptr, exc) or "error"
    where = _PRELUDE_AT.search(_js_text(cptr, stack) or "")
    _lib.JS_FreeValue(cptr, stack)
    _lib.JS_FreeValue(cptr, exc)
    if where is None:
        return message
    return f"{message} at {source.locate(int(where.group('line')))}:{where.group('col')}"


_PRELUDE_BYTECODE = compile_prelude(prelude_source.load())


# ---- the engine ------------------------------------------------------------------------------


#: Sources from this size up leave a syntax tree of tens of MiB in malloc's free lists once read as
#: TypeScript (``typescript.py``): handed back to the kernel at once, not when the next trim comes.
TRIM_AFTER_SOURCE_CHARS = 256 * 1024


class GuestEngine:
    """One fresh QuickJS runtime + context with the prelude loaded and limits set."""

    def __init__(
        self, *, stack_bytes: int = 1024 * 1024, prelude: bytes = _PRELUDE_BYTECODE, native_plain_check: bool = True
    ) -> None:
        self._ctx = _quickjs.Context()
        runtime = _runtime_pointer(self._ctx)
        if not runtime:
            raise EngineFault("could not locate the QuickJS runtime of the binding's Context")
        _lib.JS_SetHostPromiseRejectionTracker(runtime, _tracker, None)
        _lib.JS_SetInterruptHandler(runtime, _interrupt, None)  # the binding's time limit is never set
        self._cptr = _context_pointer(self._ctx)
        _unhandled.pop(self._cptr, None)  # a freed engine's context address may be reused
        #: promise pointer -> request id of the bridge promises rejected while nobody handled them.
        self._failed_unhandled: dict[int, int] = {}
        self._ctx.set_max_stack_size(stack_bytes)
        self._malloc = _malloc_state(self._ctx)
        self.native_plain_check = native_plain_check and plain_check.install(self._cptr)
        self._hook = self._load_prelude(prelude)
        self._fn: Any = None
        self._prepared: str | None = None  # the configuration text ``prepare`` built the globals from
        self._taken_args: list[str] | None = None  # the last take's small request arguments
        self._deadline = 0.0  # the cell's deadline (time.monotonic) as compile, start, pump or final_value set it

    def _load_prelude(self, bytecode: bytes) -> Any:
        cptr = _context_pointer(self._ctx)
        fn = _lib.JS_ReadObject(cptr, bytecode, len(bytecode), _READ_BYTECODE)
        if fn.tag != _JS_TAG_EXCEPTION:
            with _running_until(math.inf):  # the prelude's own top level
                result = _lib.JS_EvalFunction(cptr, fn)  # takes ownership of fn
            if result.tag != _JS_TAG_EXCEPTION:
                _lib.JS_FreeValue(cptr, result)
                # The hook's first call deletes the global (hook.js): no script to compile per engine.
                return self._ctx.get(_HOOK_SLOT)
        raise EngineFault("precompiled prelude failed to load")

    # -- set-up ---------------------------------------------------------------------------------

    def prepare(self, config_json: str) -> None:
        """Build the guest's globals for ``config_json`` ahead of the cell, e.g. while the worker is idle.

        Configuring parses host JSON and runs prelude code only, never cell code, so a prepared engine
        is the very engine ``configure`` with the same text would have made.
        """
        self._configure(config_json)
        self._prepared = config_json

    def prepared_for(self, config_json: str) -> bool:
        """Whether ``configure(config_json, ...)`` can use this unused engine: unprepared, or prepared with that text."""
        return self._prepared is None or self._prepared == config_json

    def configure(self, config_json: str, memory_limit_bytes: int) -> None:
        """Build the guest's globals for one cell (unless ``prepare`` did, from the same text), then cap the heap."""
        if self._prepared == config_json:
            self._prepared = None  # the preparation stands for this one configure
        else:
            self._configure(config_json)  # the prelude refuses a second configuration
        self._memory_limit = memory_limit_bytes
        self._ctx.set_memory_limit(memory_limit_bytes)

    def _configure(self, config_json: str) -> None:
        # Prelude code over the host's own JSON, never cell code: not bound by a cell's deadline.
        with _running_until(math.inf):
            try:
                self._hook("configure", config_json)
            except _quickjs.JSException as exc:  # a config outside guest_config.py's rule: the host's bug
                raise EngineFault(f"the prelude refused the guest config: {first_line(str(exc))}") from None

    def compile(self, code: str, budget_s: float) -> None:
        """Parse the cell as an async function body, as TypeScript where it reads differently (its types
        blanked: ``typescript.py``); raise GuestSyntaxError with cell positions."""
        stop_at = time.monotonic() + max(budget_s, MIN_CALL_S)

        def compile_text(text: str) -> Any:
            with _running_until(stop_at):
                try:
                    return self._hook("compile", text)
                except _quickjs.JSException as exc:
                    raise syntax_error(str(exc)) from None
                except _quickjs.StackOverflow as exc:
                    raise GuestSyntaxError(f"SyntaxError at cell.js:1:1: {first_line(str(exc))}") from None

        self._fn = read_cell(code, stop_at, compile_text)
        if len(code) >= TRIM_AFTER_SOURCE_CHARS:
            give_back_memory()  # a large source's syntax tree is freed to malloc, not to the kernel

    def call_cell(self, deadline: float) -> None:
        """Call the compiled cell (its synchronous start runs); its outcome is published through ``take()``."""
        self._deadline = deadline
        self._call("start", self._fn)
        self._fn = None

    # -- slices (the ``Engine`` contract) -------------------------------------------------------

    def start(self, deadline: float) -> Slice:
        """Call the compiled cell, then run its jobs until it waits, ends or fails."""
        self.call_cell(deadline)
        self.pump(deadline)
        return slice_of(self)

    def resume(self, replies: Sequence[SettledReply], deadline: float) -> Slice:
        """Settle the host's replies, then run the cell's jobs until it waits, ends or fails."""
        self._deadline = deadline
        for request_id, ok, payload in replies:
            self.settle(request_id, ok, payload)
        self.pump(deadline)
        return slice_of(self)

    # -- the job loop ---------------------------------------------------------------------------

    def pump(self, deadline: float) -> None:
        """Run pending jobs until none is left, never past ``deadline`` (time.monotonic)."""
        ctx = self._ctx
        self._deadline = deadline  # ``take`` pumps again with it when worker-kept timers fired
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GuestTimeout("cell timeout exceeded")
            # The interrupt stops a single long job at the deadline; this loop stops a flood of short ones.
            _Armed.stop_at = deadline
            try:
                if not ctx.execute_pending_job():
                    return
            except _quickjs.JSException as exc:
                _raise_engine_exception(str(exc))
            except _quickjs.StackOverflow:
                continue  # an overflow inside a job rejects that job's promise; keep going
            finally:
                _Armed.stop_at = 0.0

    def final_value(self, headroom_bytes: int, deadline: float) -> str:
        """JSON text of the cell's return value; the heap cap grows by ``headroom_bytes`` for the copy.

        Getters and proxy traps of the value run here, so the cell's own deadline still holds.
        """
        self._ctx.set_memory_limit(self._memory_limit + headroom_bytes)
        self._deadline = deadline
        return self._text("value", self._call("value"))

    def take(self) -> Taken:
        """The requests, cancels and output queued since the last take, and the cell's outcome so far.

        Joining them copies what the cell queued, at most its heap cap: that copy is the host's
        cost, so the cap is lifted for the call (no cell code runs inside it).  When the requests'
        arguments are small the prelude appends them, one per line, and ``request_args`` hands
        them out from here instead of asking the engine once per request.
        """
        while True:
            self._ctx.set_memory_limit(2 * self._memory_limit)
            try:
                text = self._text("take", self._call("take"))
            finally:
                self._ctx.set_memory_limit(self._memory_limit)
            if text:
                break
            # Zero-delay timers the worker keeps (prelude/timers.js) fired now that the jobs drained:
            # their callbacks are jobs, run before the snapshot is taken.
            self.pump(self._deadline)
        snapshot, inline, args = text.partition("\n")
        self._taken_args = args.split("\n") if inline else None
        taken: Taken = loads(snapshot)
        if taken["output"]:
            # Each entry is JSON text inside the snapshot's: its escaped lone surrogates survive the parse.
            taken["output"] = [well_formed(entry) for entry in taken["output"]]
        return taken

    def request_args(self, index: int) -> str:
        """The JSON argument text of request ``index`` of the last ``take`` (each is handed over once).

        Flattening it may copy it, as in ``take``: the cap is lifted for the call.
        """
        if self._taken_args is not None:
            text, self._taken_args[index] = self._taken_args[index], "[]"
            return text
        self._ctx.set_memory_limit(2 * self._memory_limit)
        try:
            return self._text("args", self._call("args", index))
        finally:
            self._ctx.set_memory_limit(self._memory_limit)

    def settle(self, request_id: int, ok: bool, payload: str | None) -> None:
        """Resolve or reject one pending guest request with a JSON payload."""
        if ok and payload is not None and GC_PAUSE_BYTES <= len(payload) >= self.heap_bytes() // HEAP_PER_REPLY_BYTE:
            with _collected_first(self._ctx, self._malloc):
                self._call("settle", request_id, payload)
        elif ok:
            self._call("settle", request_id, payload)
        elif self._call("fail", request_id, payload):
            # "reject" runs no cell code before the engine reports the rejection, so a report
            # during it is this request's promise, with nobody handling it (yet).
            _bridge_watch[self._cptr] = 0
            try:
                self._call("reject", request_id)
                promise = _bridge_watch[self._cptr]
            finally:
                del _bridge_watch[self._cptr]
            if promise:
                self._failed_unhandled[promise] = request_id

    def cancel_timers(self) -> None:
        self._call("cancelTimers")

    def unhandled_bridge_rejection(self) -> BridgeRejection | None:
        """The error text and host code of the first host failure nobody handled, else None."""
        still = _unhandled.get(self._cptr, {})
        ids = [request_id for promise, request_id in self._failed_unhandled.items() if promise in still]
        if not ids:
            return None
        result = self._call("unhandledBridge", min(ids))
        if result is None:
            return None
        rejection: BridgeRejection = loads(self._text("unhandledBridge", result))
        return rejection

    def unhandled_rejections(self) -> list[str]:
        """Reason texts of rejected promises of this engine that never got a handler."""
        return list(_unhandled.get(self._cptr, {}).values())

    def close(self) -> None:
        """Forget this engine's rejection records; the runtime itself is freed with the object."""
        _unhandled.pop(self._cptr, None)

    def heap_bytes(self) -> int:
        """The bytes the engine has allocated: what its memory limit counts, read in O(1)."""
        return int(self._malloc[1])

    def dump(self) -> bytes:
        raise EngineFault(NOT_DUMPABLE)  # a QuickJS runtime's heap cannot be written out

    def restore(self, state: bytes) -> int:
        raise EngineFault(NOT_DUMPABLE)

    def _call(self, op: str, *args: Any) -> Any:
        """Call the hook.  Cell code can run inside it (getters, proxy traps, species, setters), so
        a JS exception or stack overflow here is the cell's failure, not the engine's.

        It runs until the cell's deadline, and at least MIN_CALL_S: a settle or take just after the
        deadline still completes its own prelude work, and cell code inside it is stopped soon after.
        """
        _Armed.stop_at = max(self._deadline, time.monotonic() + MIN_CALL_S)
        try:
            result = self._hook(op, *args)
        except _quickjs.JSException as exc:
            _raise_engine_exception(str(exc), guest=True)
        except _quickjs.StackOverflow as exc:
            raise GuestFault(f"InternalError: stack overflow: {first_line(str(exc))}") from None
        except (TypeError, SystemError, UnicodeError) as exc:  # the binding could not convert a value back
            raise EngineFault(f"engine value conversion failed in {op}: {exc}") from None
        finally:
            _Armed.stop_at = 0.0
        # Every JSON text leaving the guest passes here: lone surrogates become U+FFFD once, at the source.
        return well_formed(result) if isinstance(result, str) else result

    @staticmethod
    def _text(op: str, result: object) -> str:
        """The hook's operations that answer with JSON text; anything else is a broken prelude."""
        if not isinstance(result, str):
            raise EngineFault(f"the prelude's {op} operation returned {type(result).__name__}, not JSON text")
        return result


@contextlib.contextmanager
def _collected_first(ctx: _quickjs.Context, malloc: Any) -> Iterator[None]:
    """Run the engine's collector once, then keep it paused for the block (a large reply's parse).

    A parse makes only live objects, yet the engine's collector runs each time the heap grows by
    half since its last run, walking all that the parse built so far: a 10 MiB reply cost ~80 ms
    to parse and up to ~190 ms more of collections.  Collecting first frees what the cell left
    behind (the engine never collects on a failed allocation, so garbage could otherwise make the
    parse fail the heap cap), and it costs at most about what the parse does: ``settle`` asks for it
    only when the heap is not much larger than the reply.  Afterwards the next collection is due
    where the engine puts it after one, at 1.5x the heap.  A settle runs no cell code (the promise's
    reactions are jobs for later), so only the parse allocates meanwhile.
    """
    runtime = _runtime_pointer(ctx)
    ctx.gc()
    _lib.JS_SetGCThreshold(runtime, _NO_COLLECTION)
    try:
        yield
    finally:
        heap = int(malloc[1])
        _lib.JS_SetGCThreshold(runtime, heap + heap // 2)


def gc_threshold(engine: GuestEngine) -> int:
    """The heap size at which the engine's collector runs next (for tests and diagnostics)."""
    return int(_lib.JS_GetGCThreshold(_runtime_pointer(engine._ctx)))


def _raise_engine_exception(text: str, *, guest: bool = False) -> None:
    first = well_formed_str(first_line(text))
    if first.startswith("InternalError: interrupted"):
        raise GuestTimeout("cell timeout exceeded")
    if first in ("null", "InternalError: out of memory") or "out of memory" in first:
        raise EngineFault(first)  # the worker reports this as memory_limit_exceeded
    if guest:
        raise GuestFault(first or "Error")
    raise EngineFault(first or "engine error")


def check_engine() -> None:
    """Prove at worker start that the prelude loads, unhandled rejections are seen, the heap is read right
    and endless guest code is interrupted."""
    _check_malloc_state(_quickjs.Context())
    engine = GuestEngine()
    engine.configure('{"tools":[],"mcp":[],"maxRequestBytes":1024}', 8 * 1024 * 1024)
    # Typed: the TypeScript stripper parses once before the worker confines itself.
    engine.compile('const probe: string = "probe"; void Promise.reject(new Error(probe)); return 1', 1.0)
    outcome = engine.start(time.monotonic() + 1.0)
    if not (isinstance(outcome, Failed) and "probe" in outcome.text):
        raise EngineFault("the QuickJS rejection tracker is not wired; is quickjs-ng the pinned version?")
    engine.close()
    _check_interrupt()
    probe = _quickjs.Context()  # the C plain-data check, where it was built, answers its proof table
    wrong = plain_check.prove(_context_pointer(probe), probe.eval)
    if wrong is not None:
        raise EngineFault(f"{wrong}; is quickjs-ng the pinned version?")


def _check_interrupt() -> None:
    """An endless loop stops at its deadline: the interrupt handler is what enforces every cell's."""
    engine = GuestEngine()
    engine.configure('{"tools":[],"mcp":[],"maxRequestBytes":1024}', 8 * 1024 * 1024)
    # Endless for 5 ms of deadline, but a loop that ends itself after a second: a broken handler is
    # reported, not a worker that never starts.
    engine.compile("const end = Date.now() + 1000; while (Date.now() < end) {}", 2.0)
    try:
        engine.call_cell(time.monotonic() + 0.005)
    except GuestTimeout:
        return
    finally:
        engine.close()
    raise EngineFault("the QuickJS interrupt handler did not stop a busy loop; is quickjs-ng the pinned version?")
