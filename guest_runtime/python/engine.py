"""The one module that talks to Monty (PyPI ``pydantic-monty``): a Python cell's engine.

``PythonEngine`` offers the worker loop (``guest_runtime/worker.py``) the same operations as the
QuickJS ``GuestEngine``: configure, compile, start, pump, take, request_args, settle, final_value.
Monty runs here, in-process, inside the confined worker: the pinned release embeds the interpreter
in its extension (later releases only drive a separate ``monty`` executable, which a confined worker
can neither start nor confine).  Monty has no OS access of its own: every file, environment or clock
call it would make surfaces as an OS-call snapshot, which is answered "not handled", so the guest sees
an ordinary Python error.

A cell runs until every task awaits host work; Monty then pauses it in a ``FutureSnapshot``.  The
engine dumps that snapshot to bytes and drops the live interpreter: a parked Python cell costs its
paused state, the bytes (reported as its heap), and loading them again restarts Monty's time limit,
so a leg's budget never counts the time the cell spent parked.

Guest-visible names are external functions: a call to ``text``, ``json``, ``print``, a tool's callable
name, ``yield_control``, ``sleep``, ``store`` or ``load`` pauses Monty at a ``FunctionSnapshot``; host
requests are queued (answered later by ``settle``), output is kept for ``take``.  Any other unknown
name is a ``NameError``, as in Python.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pydantic_monty as monty

from bridge.jsoncodec import dumps_text, loads

from ..errors import EngineFault, GuestFault, GuestSyntaxError, GuestTimeout
from .namespaces import Namespaces, handle, route

EMPTY = Namespaces({})
from .values import NotJson, to_json_text, to_json_value

SCRIPT = "cell.py"
MAX_FRAMES = 10
#: What a cell emits at most, as for JavaScript cells (bridge/output.py re-checks it).
MAX_OUTPUT_ENTRIES = 10000
#: print() output a cell keeps in total; past it one marker says the rest was dropped (console.log's cap).
PRINT_TOTAL = 16384
#: Monty's own stack bound; a deeper call chain is a RecursionError the cell may catch.
MAX_RECURSION_DEPTH = 200

_TIMEOUT = re.compile(r"^TimeoutError: time limit exceeded: [0-9.]+ms > [0-9.]+ms$")
_OUT_OF_MEMORY = re.compile(r"^MemoryError: memory limit exceeded: ")

Snapshot = Any  # monty.FunctionSnapshot | NameLookupSnapshot | FutureSnapshot | MontyComplete


class PythonEngine:
    """One Python cell on Monty, driven one slice at a time by the worker loop."""

    def __init__(self) -> None:
        self._program: monty.Monty | None = None
        self._parked: bytes | None = None  # the dumped FutureSnapshot between slices
        self._ns = EMPTY
        self._caps: dict[str, int] = {}
        self._memory_limit = 0
        self._next_id = 1
        self._pending: dict[int, tuple[int, Callable[[Any], Any] | None]] = {}  # request id -> (call id, shape)
        self._replies: dict[int, Any] = {}  # Monty call id -> ExternalResult, until the next slice
        self._queue: list[dict[str, Any]] = []
        self._queue_args: list[str] = []
        self._taken_args: list[str] = []
        self._queued_bytes = 0
        self._cancels: list[int] = []
        self._output: list[str] = []
        self._emitted = 0
        self._printed = 0
        self._print_line = ""
        self._done: dict[str, Any] | None = None
        self._value: Any = None
        self._heap = 0

    # -- set-up -------------------------------------------------------------------------------------

    def configure(self, config_json: str, memory_limit_bytes: int) -> None:
        cfg = loads(config_json)
        self._ns = Namespaces(cfg)
        self._caps = {
            "maxRequestBytes": cfg["maxRequestBytes"],
            "maxQueuedRequests": cfg.get("maxQueuedRequests") or 1024,
            "maxPendingRequests": cfg.get("maxPendingRequests") or 128,
            "maxQueuedBytes": cfg.get("maxQueuedBytes") or cfg["maxRequestBytes"],
            "maxRequestValues": cfg.get("maxRequestValues") or 1_000_000,
        }
        self._memory_limit = memory_limit_bytes

    def compile(self, code: str, budget_s: float) -> None:
        """Parse the cell; a syntax error (or a construct Monty does not run) is the caller's input error."""
        try:
            self._program = monty.Monty(code, script_name=SCRIPT, dataclass_registry=self._ns.classes)
        except monty.MontySyntaxError as exc:
            raise GuestSyntaxError(_syntax_text(exc.display("type-msg"), exc.traceback())) from None
        except monty.MontyError as exc:  # e.g. NotImplementedError: class definitions
            raise GuestSyntaxError(_syntax_text(_head(exc), _frames_of(exc))) from None

    def start(self, deadline: float) -> None:
        assert self._program is not None
        limits: monty.ResourceLimits = {
            "max_duration_secs": max(deadline - time.monotonic(), 0.001),
            "max_memory": self._memory_limit,
            "max_recursion_depth": MAX_RECURSION_DEPTH,
        }
        program, self._program = self._program, None
        self._advance(lambda: program.start(limits=limits, print_callback=self._on_print))

    # -- the job loop -------------------------------------------------------------------------------

    def pump(self, deadline: float) -> None:
        """Resume the parked cell with the replies settled since its last slice, if any."""
        if time.monotonic() >= deadline:
            raise GuestTimeout("cell timeout exceeded")
        if self._parked is None or not self._replies:
            return
        data, self._parked = self._parked, None
        replies, self._replies = self._replies, {}
        snapshot: Any = monty.load_snapshot(  # it was a FutureSnapshot
            data, print_callback=self._on_print, dataclass_registry=self._ns.classes
        )
        self._advance(lambda: snapshot.resume(replies))

    def settle(self, request_id: int, ok: bool, payload: str | None) -> None:
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return  # a request the cell no longer waits for
        call_id, shape = entry
        if ok:
            value = None if payload is None else loads(payload)
            self._replies[call_id] = {"return_value": shape(value) if shape else value}
        else:
            self._replies[call_id] = {"exception": _host_error(loads(payload or "{}"))}

    def take(self) -> str:
        outstanding = len(self._pending)
        snap = {
            "requests": self._queue,
            "cancels": self._cancels,
            "output": self._output,
            "outstanding": outstanding,
            "required": 0 if self._done is not None else outstanding,
            "done": self._done,
        }
        self._taken_args, self._queue_args = self._queue_args, []
        self._queue, self._queued_bytes, self._cancels, self._output = [], 0, [], []
        return dumps_text(snap)

    def request_args(self, index: int) -> str:
        text = self._taken_args[index] if index < len(self._taken_args) else "[]"
        if index < len(self._taken_args):
            self._taken_args[index] = ""  # handed over once
        return text

    def final_value(self, headroom_bytes: int, deadline: float) -> str:
        value, self._value = self._value, None
        try:
            return to_json_text(value)
        except NotJson as exc:
            # JSON.stringify would fail the cell the same way: the value has no JSON form.
            raise GuestFault(f"TypeError: the cell's value: {exc}") from None

    def cancel_timers(self) -> None:
        """Nothing to do: a Python cell's sleeps are awaited, never left behind."""

    def unhandled_bridge_rejection(self) -> str | None:
        return None  # an un-awaited call's outcome is nobody's: Python drops it (see _advance)

    def unhandled_rejections(self) -> list[str]:
        return []

    def heap_bytes(self) -> int:
        return self._heap

    def close(self) -> None:
        self._parked = None
        self._program = None

    # -- one slice --------------------------------------------------------------------------------

    def _advance(self, step: Callable[[], Snapshot]) -> None:
        """Run until the cell ends or every task waits on the host; answer its own calls on the way."""
        try:
            snapshot = step()
            while True:
                if isinstance(snapshot, monty.MontyComplete):
                    self._finish_ok(snapshot)
                    return
                if isinstance(snapshot, monty.FutureSnapshot):
                    self._parked = snapshot.dump()
                    self._heap = len(self._parked)
                    return
                if isinstance(snapshot, monty.NameLookupSnapshot):
                    value = self._ns.globals.get(snapshot.variable_name)
                    # No value: the guest gets a NameError.
                    snapshot = snapshot.resume() if value is None else snapshot.resume(value=value)
                elif snapshot.is_os_function:
                    snapshot = snapshot.resume_not_handled()  # no files, no environment, no clock
                else:
                    snapshot = snapshot.resume(self._call(snapshot))
        except monty.MontyRuntimeError as exc:
            self._finish_failed(exc)
        except (monty.MontyError, RuntimeError, ValueError) as exc:  # Monty itself failed, not the cell
            raise EngineFault(f"Monty failed: {exc}") from None

    def _finish_ok(self, complete: Any) -> None:
        self._flush_print()
        try:
            value = complete.output
        except (RuntimeError, ValueError) as exc:  # Monty's own conversion refused it (too deep)
            self._done = _failure(f"TypeError: the cell's value nests too deep to cross as JSON ({exc})")
            return
        # Calls the cell started but never awaited are dropped with it: nobody can see their outcome.
        self._cancels.extend(self._pending)
        self._pending.clear()
        self._value = value
        self._done = {"ok": True}

    def _finish_failed(self, exc: monty.MontyRuntimeError) -> None:
        self._flush_print()
        head = _head(exc)
        if _TIMEOUT.match(head):
            raise GuestTimeout("cell timeout exceeded")
        if _OUT_OF_MEMORY.match(head):
            raise EngineFault(f"out of memory: {head}")  # the worker reports memory_limit_exceeded
        self._cancels.extend(self._pending)
        self._pending.clear()
        self._done = _failure(_error_text(head, _frames_of(exc)))

    # -- the guest's external functions -----------------------------------------------------------

    def _call(self, snapshot: Any) -> Any:
        name = snapshot.function_name
        try:
            args, kwargs = snapshot.args, snapshot.kwargs
        except (RuntimeError, ValueError) as exc:  # Monty's own conversion refused them (too deep)
            return {"exception": TypeError(f"the call's arguments nest too deep to cross as JSON ({exc})")}
        try:
            if snapshot.is_method_call:
                return self._method(snapshot, name, args[0], args[1:], kwargs)
            if name == "text":
                return self._emit_text(*args, **kwargs)
            if name == "json":
                return self._emit_json(*args, **kwargs)
            tool = self._ns.tools.get(name)
            if tool is not None:
                if args:
                    raise TypeError(f"{name}() takes the tool's input as keyword arguments: {name}(field=value, ...)")
                return self._request(snapshot, *_routed(tool, "call", (), kwargs))
            if name == "yield_control":
                reason = (args or [kwargs.get("reason")])[0]
                return self._request(snapshot, "yield", [None if reason is None else str(reason)])
            if name == "sleep":
                return self._sleep(snapshot, *args, **kwargs)
            if name == "store":
                return self._store(snapshot, *args, **kwargs)
            if name == "load":
                return self._load(snapshot, *args, **kwargs)
        except (TypeError, ValueError, OverflowError) as exc:
            # The guest gets the built-in type itself (Monty knows no host subclasses).
            kind = ValueError if isinstance(exc, ValueError) else TypeError
            return {"exception": kind(str(exc))}
        return {"exception": NameError(f"name {name!r} is not defined")}

    def _method(self, snapshot: Any, name: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A method of a namespace: ``catalog.all()`` answers here, every other one is a host request."""
        if getattr(target, "namespace", None) == "catalog" and name == "all":
            return {"return_value": list(self._ns.handles)}
        method, request_args = _routed(target, name, args, kwargs)
        shape = _as_handles if method == "search" else None
        return self._request(snapshot, method, request_args, shape=shape)

    def _emit(self, entry: dict[str, Any]) -> None:
        if self._emitted >= MAX_OUTPUT_ENTRIES:
            raise ValueError(
                f"too many output entries (limit {MAX_OUTPUT_ENTRIES} per cell): "
                "join text into one string and emit it with fewer text()/json() calls"
            )
        self._emitted += 1
        self._output.append(dumps_text(entry))

    def _emit_text(self, value: Any) -> Any:
        self._flush_print()
        self._emit({"type": "text", "text": value if isinstance(value, str) else to_json_text(value)})
        return {"return_value": None}

    def _emit_json(self, value: Any) -> Any:
        self._flush_print()
        data, _ = to_json_value(value)
        self._emit({"type": "json", "value": data})
        return {"return_value": None}

    def _on_print(self, _stream: str, text: str) -> None:
        # Each printed line is one text entry, in order with text()/json(); the total is bounded.
        if self._printed > PRINT_TOTAL:
            return
        self._printed += len(text)
        if self._printed > PRINT_TOTAL:
            self._print_line = ""
            self._output.append(dumps_text({"type": "text", "text": "[print output truncated]"}))
            return
        lines = (self._print_line + text).split("\n")
        self._print_line = lines.pop()
        for line in lines:
            if self._emitted < MAX_OUTPUT_ENTRIES:
                self._emitted += 1
                self._output.append(dumps_text({"type": "text", "text": line}))

    def _flush_print(self) -> None:
        if self._print_line:
            line, self._print_line = self._print_line, ""
            self._on_print("stdout", line + "\n")

    def _sleep(self, snapshot: Any, seconds: Any) -> Any:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError("sleep(seconds) needs a number of seconds")
        return self._request(snapshot, "sleep", [max(int(seconds * 1000), 0)])

    def _store(self, snapshot: Any, key: Any, value: Any = None) -> Any:
        _check_key(key)
        if value is None:
            return self._request(snapshot, "store.delete", [key])
        return self._request(snapshot, "store.set", [key, value])

    def _load(self, snapshot: Any, key: Any) -> Any:
        _check_key(key)
        return self._request(snapshot, "store.get", [key], shape=lambda r: None if r is None else r.get("value"))

    def _request(self, snapshot: Any, method: str, args: list[Any], shape: Callable[[Any], Any] | None = None) -> Any:
        """Queue one host request; the guest gets a future that ``settle`` resolves."""
        caps = self._caps
        if len(self._pending) >= caps["maxPendingRequests"]:
            raise ValueError(
                f"too many host requests pending (limit {caps['maxPendingRequests']}: tool calls, sleeps and "
                "yield_control all count); await some before starting more"
            )
        if len(self._queue) >= caps["maxQueuedRequests"]:
            raise ValueError(
                f"too many host requests queued at once (limit {caps['maxQueuedRequests']}); await some before starting more"
            )
        try:
            data, count = to_json_value(args, max_values=caps["maxRequestValues"])
        except OverflowError:
            raise ValueError(
                f"request arguments hold more than {caps['maxRequestValues']} JSON values, over the max_request_values "
                "cap; pass fewer, larger values (for example a table as one CSV or JSON string), or split the data "
                "over several calls"
            ) from None
        text = dumps_text(data)
        if len(text) > caps["maxRequestBytes"]:
            raise ValueError(
                f"request arguments are {len(text)} characters, over the {caps['maxRequestBytes']}-character bridge "
                "frame cap; pass less data per call"
            )
        if self._queue and self._queued_bytes + len(text) > caps["maxQueuedBytes"]:
            raise ValueError(
                f"host requests started in one burst would carry {self._queued_bytes + len(text)} characters of "
                f"arguments, over the {caps['maxQueuedBytes']}-character cap; await some before starting more"
            )
        self._queued_bytes += len(text)
        request_id = self._next_id
        self._next_id += 1
        self._pending[request_id] = (snapshot.call_id, shape)
        self._queue.append({"id": request_id, "method": method})
        self._queue_args.append(text)
        return {"future": ...}


# ---- errors ---------------------------------------------------------------------------------------


def _failure(text: str) -> dict[str, Any]:
    return {"ok": False, "bridge": False, "error": text, "code": "", "oom": False}


def _routed(target: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, list[Any]]:
    found = route(target, name, args, kwargs)
    if found is None:
        raise TypeError(f"{name}() is not a method the host serves")
    return found


def _as_handles(metas: Any) -> Any:
    return [handle(m) for m in metas] if isinstance(metas, list) else metas


def _check_key(key: Any) -> None:
    if not isinstance(key, str) or not 1 <= len(key) <= 256:
        raise TypeError("store key must be a string of 1-256 characters")


def _host_error(err: Any) -> BaseException:
    """A host failure as the Python exception the guest catches; a stable code ends its message: ``(code: ...)``.

    Monty's exceptions are the built-in types, which carry no attributes: the code travels in the text.
    """
    message = err.get("message") if isinstance(err, dict) else None
    message = message if isinstance(message, str) else "host request failed"
    name = err.get("name") if isinstance(err, dict) else None
    code = err.get("code") if isinstance(err, dict) and isinstance(err.get("code"), str) else None
    kind: type[Exception] = {"TypeError": TypeError, "RangeError": ValueError}.get(name or "", RuntimeError)
    return kind(f"{message} (code: {code})" if code else message)


def _head(exc: monty.MontyError) -> str:
    display = getattr(exc, "display", None)
    text = display("type-msg") if display is not None else str(exc)
    return str(text).strip().split("\n")[-1] or "Exception"


def _frames_of(exc: monty.MontyError) -> list[Any]:
    traceback = getattr(exc, "traceback", None)
    return list(traceback()) if traceback is not None else []


def _error_text(head: str, frames: list[Any]) -> str:
    """``Name: message`` first, then the cell's own frames (innermost last, as Python prints them)."""
    shown = [f for f in frames if f.filename == SCRIPT][-MAX_FRAMES:]
    lines = [head]
    for f in shown:
        where = f'  File "{SCRIPT}", line {f.line}, column {f.column}, in {f.function_name or "<module>"}'
        lines.append(where)
        if f.source_line:
            lines.append("    " + f.source_line.strip()[:200])
    return "\n".join(lines)


def _syntax_text(head: str, frames: list[Any]) -> str:
    name, _, message = head.strip().split("\n")[-1].partition(": ")
    line, col = (frames[-1].line, frames[-1].column) if frames else (1, 1)
    return (
        f"{name or 'SyntaxError'} at {SCRIPT}:{line}:{col}: {message or head}. "
        "No tools were dispatched; correct the Python source and submit it again."
    )
