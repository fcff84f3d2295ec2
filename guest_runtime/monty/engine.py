"""The one module that talks to Monty (PyPI ``pydantic-monty`` 1.x): a Python cell's engine.

``PythonEngine`` is the ``Engine`` of Python cells (``guest_runtime/engine.py``), as the QuickJS
``GuestEngine`` is of JavaScript cells; the worker's driver cannot tell them apart.

Monty 1.x runs code in a ``monty subprocess`` child, driven over framed protobuf by the client in this
process.  A worker that runs Python cells holds one pool (``MontyPool``) with ONE such child, started
from the already confined worker, so it inherits every layer of the worker (its network namespace, uid,
no_new_privs, its seccomp filter, and a Landlock ruleset that leaves only the ``monty`` binary and its
libraries: ``confinement.PYTHON_CELLS``).  The worker is bound to one principal for its whole life, so the
child, reused across the worker's cells, never holds two principals' heaps; each cell is a fresh checkout.
The child and the client's threads run on one CPU, which the worker's thread visits while it uses the child
(``placement.py``): every call between them is then a switch on that CPU, not a wake-up of another.
The child's frames are decoded here, inside the confined worker, never in the service.

A slice runs the cell until every task awaits host work (Monty pauses it in a ``FutureSnapshot``) and
dumps that snapshot to bytes: a parked cell costs them in this process (its heap).  Its session stays
checked out until another cell needs the child (``MontyPool.keep``); the next slice resumes the live
snapshot, or loads the bytes into a fresh session.  ``dump`` and ``restore`` let a later owner keep such
bytes and resume them elsewhere (another worker, another replica).

Guest-visible names are external functions: a call to ``text``, ``json``, ``error_info``, a tool's
callable name, ``yield_control``, ``sleep``, ``store`` or ``load`` pauses Monty at a
``FunctionSnapshot``; host requests are queued (answered by a later ``resume``), output is kept for the
slice's outcome, ``error_info`` is answered at once.  The namespaces (``catalog``, ``MCP``, tool
handles, ...) are host objects (``ClassInstance``) whose method calls pause Monty the same way, naming the
object by a stable id (``namespaces.object_id``), so a call still routes after the snapshot was dumped and loaded.
Monty's OS calls (files, environment, sleeps) are answered "not handled": the guest sees an ordinary
Python error.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import pydantic_monty as monty

from bridge.jsoncodec import dumps_text, loads
from bridge.messages import GuestRequest, Phase

from ..engine import Failed, Returned, SettledReply, Slice, Waiting, bridge_failure_code, stalled
from ..errors import EngineFault, GuestFault, GuestRuntimeError, GuestSyntaxError, GuestTimeout
from ..guest_config import read_caps
from .cell_source import Rewrite, rewritten
from .dump_format import pack_dump, unpack_dump
from .error_text import SCRIPT, described, error_head, error_text, frames_of, limit_error, syntax_text, uncaught
from .host_functions import SHAPE_NAMES, SHAPES, request_for
from .host_requests import HostRequests
from .namespaces import Namespaces, object_id
from .output import CellOutput
from .placement import Placement
from .values import NotJson, child_text, to_json_text

#: Modules Monty's client imports on its first session (trace contexts, decimals): imported with it, while
#: the worker can still open files; once confined it cannot.
for _module in ("decimal", "opentelemetry.context"):
    importlib.import_module(_module)

EMPTY = Namespaces({})
#: What a value Monty cannot hand over as plain data (a type, a module object) is told.
NO_JSON_FORM = "has no JSON form (use dict, list, str, int, float, bool, None)"
#: Monty's own stack bound; a deeper call chain is a RecursionError the cell may catch.
MAX_RECURSION_DEPTH = 200
#: Suspensions (host calls, output calls, name lookups) one slice may make: Monty's backstop, far above what
#: the bridge caps let a slice queue (1,024 requests, 1,000 output entries).  Loading a dump resets it.
MAX_SUSPENSIONS = 100_000
#: The pool's own hard deadline on one turn of the child (it kills the child past it): a backstop behind
#: Monty's turn limit (set from the cell's budget) and the worker's deadline.
REQUEST_TIMEOUT_S = 600.0
#: Exit status of a Monty child whose allocator reached its hard memory limit.
HARD_MEMORY_EXIT = 65
#: No sleeps in the child (they would block the worker): ``time.sleep``/``asyncio.sleep`` are OS calls,
#: answered "not handled"; ``sleep(s)`` is the host's timer.  Clocks read the child's, in UTC.
OS_POLICY: monty.OSPolicy = {"sleep": "call_host"}


#: Where Monty stops a slice.
Snapshot = monty.FunctionSnapshot | monty.NameLookupSnapshot | monty.FutureSnapshot | monty.MontyComplete


# ---- the worker's one Monty child ---------------------------------------------------------------


class MontyPool:
    """The worker's pool of one ``monty subprocess`` child, started on first use (or by ``start``).

    The pool replaces a child that died (a cell that reached Monty's hard memory limit, a crash) at the next
    checkout; the other cells of the worker are parked as bytes here, so they lose nothing.

    A parked cell keeps its session (``keep``) until another cell needs the child; its bytes are dumped all
    the same, so ``open`` may close the kept session for the next cell without losing it (docs: choices.md).
    """

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary  # None: Monty's own resolution (the ``monty`` of this environment)
        self.placement = Placement()  # the child's CPU, and the main thread's visits there (``placed``)
        self.placed = self.placement.placed
        self._pool: monty.Monty | None = None
        #: The engine whose parked cell's session is still checked out, that session, and its live snapshot.
        self._kept: tuple[object, monty.MontySession, monty.FutureSnapshot] | None = None
        self._done: monty.MontySession | None = None  # a finished cell's, until ``tidy``

    def start(self) -> None:
        """Start the child now (the worker calls it once confined, before it says ready)."""
        if self._pool is None:
            self.placement.check()
            with self.placed():  # the client's threads and the child inherit the CPU
                self._pool = self._started()

    def _started(self) -> monty.Monty:
        pool = monty.Monty(
            binary_path=self.binary,
            min_processes=1,
            max_processes=1,
            request_timeout=REQUEST_TIMEOUT_S,
        )
        pool.__enter__()
        return pool

    def open(self, limits: monty.ResourceLimits) -> monty.MontySession:
        """A fresh session checked out of the child (closing a kept one first), to ``release`` or ``keep``."""
        self.tidy()
        self.drop()
        self.start()
        assert self._pool is not None
        return self._pool.checkout(script_name=SCRIPT, limits=limits, os_policy=OS_POLICY).__enter__()

    def keep(self, owner: object, session: monty.MontySession, snapshot: monty.FutureSnapshot) -> None:
        """Leave ``session`` checked out with ``owner``'s parked ``snapshot`` live in it, until ``take`` or ``drop``."""
        self._kept = (owner, session, snapshot)

    def take(self, owner: object) -> tuple[monty.MontySession, monty.FutureSnapshot] | None:
        """The session and live snapshot ``owner`` kept, if nobody closed them since; the pool forgets them."""
        kept = self._kept
        if kept is None or kept[0] is not owner:
            return None
        self._kept = None
        return kept[1], kept[2]

    def holds(self, owner: object) -> bool:
        """Whether ``owner``'s parked cell still has its session checked out."""
        return self._kept is not None and self._kept[0] is owner

    def drop(self, owner: object | None = None) -> None:
        """Close the kept session (only if ``owner`` kept it, when given): its cell lives on as its bytes."""
        kept = self._kept
        if kept is not None and (owner is None or kept[0] is owner):
            self._kept = None
            with self.placed():
                close(kept[1])

    def release(self, session: monty.MontySession) -> None:
        """A finished cell's ``session``, handed back by ``tidy`` (or ``open``) after the cell's answer."""
        self.tidy()
        self._done = session

    def tidy(self) -> None:
        """Hand back the session a finished cell left (the worker calls it when it has nothing to answer)."""
        done, self._done = self._done, None
        if done is not None:
            with self.placed():
                close(done)

    def close(self) -> None:
        self.tidy()
        self.drop()
        pool, self._pool = self._pool, None
        if pool is not None:
            with self.placed():
                pool.__exit__(None, None, None)


def close(session: monty.MontySession) -> None:
    """Hand a session back to the pool (a crashed child is replaced at the next checkout)."""
    session.__exit__(None, None, None)


#: This worker's pool; a process that runs Python cells has one.
POOL = MontyPool()


# ---- one cell ------------------------------------------------------------------------------------


class PythonEngine:
    """One Python cell on Monty, driven one slice at a time by the worker loop."""

    def __init__(self, pool: MontyPool | None = None, *, value_in_child: bool = True) -> None:
        self._pool = POOL if pool is None else pool
        self._value_in_child = value_in_child  # False: every value crosses as objects (benches, tests)
        self._deferred: GuestRuntimeError | None = None  # the first slice's fault, raised by ``start``
        self._parked: bytes | None = None  # the dumped FutureSnapshot between slices
        self._live: monty.FutureSnapshot | None = None  # the snapshot a slice parked in (``_slice_on``)
        self._ns = EMPTY
        self._objects: dict[uuid.UUID, Any] = {}  # host objects the guest holds, by the id Monty names them by
        self._requests = HostRequests(read_caps({"maxRequestBytes": 1}))  # replaced by configure
        self._output = CellOutput()
        self._memory_limit = 0
        self._ended = False
        self._failure: tuple[str, Phase, str] | None = None  # how the cell failed, once it ended
        self._value: object = None
        self._text: str | None = None  # the value as JSON, written by the child (``cell_source``)
        self._rewrite: Rewrite | None = None  # how the source the child runs differs from the cell's
        self._session: monty.MontySession | None = None  # the session a slice runs on
        self._heap = 0

    # -- set-up -------------------------------------------------------------------------------------

    def prepare(self, config_json: str) -> None:
        """Nothing to build ahead: configuring a Python cell costs microseconds."""

    def prepared_for(self, config_json: str) -> bool:
        return True

    def configure(self, config_json: str, memory_limit_bytes: int) -> None:
        cfg = loads(config_json)
        self._ns = Namespaces(cfg)
        self._requests = HostRequests(read_caps(cfg))
        self._memory_limit = memory_limit_bytes
        for value in [*self._ns.globals.values(), *self._ns.handles]:
            self._register(value)

    def _register(self, value: object) -> None:
        """Know ``value`` (and the namespaces in its fields) by the id the guest names it by."""
        named = object_id(value)
        if named is not None:
            self._objects[named] = value
        for field in dataclasses.fields(cast("Any", value)):
            inner = getattr(value, field.name)
            if dataclasses.is_dataclass(inner) and not isinstance(inner, type):
                self._register(inner)

    def compile(self, code: str, budget_s: float) -> None:
        """Hand the cell to Monty, which parses it and runs it to its first stop (the first slice, reported by
        ``start``).  A syntax error, or a construct Monty does not run, is the caller's input error."""
        limits: monty.ResourceLimits = {
            # A backstop: the worker's deadline is checked after every slice, Monty's clock stops while the
            # cell waits on the host, and the dump keeps these limits for the cell's later slices.
            "max_turn_duration_secs": max(budget_s, 0.001),
            "max_memory": self._memory_limit,
            "max_recursion_depth": MAX_RECURSION_DEPTH,
            "max_suspensions": MAX_SUSPENSIONS,
        }
        try:
            with self._pool.placed():
                self._first_slice(code, limits)
        except GuestSyntaxError:
            raise
        except GuestRuntimeError as exc:
            self._deferred = exc  # the first slice's fault: ``start`` reports it
        except Exception as exc:  # noqa: BLE001 - no Monty child to run it (it cannot start, or died at once)
            self._deferred = EngineFault(f"Monty failed: {described(exc)}")

    def _first_slice(self, code: str, limits: monty.ResourceLimits) -> None:
        source = rewritten(code) if self._value_in_child else None
        if source is not None:
            self._rewrite = source[1]
            try:
                self._run_first(source[0], limits)
                return
            except GuestSyntaxError:
                self._rewrite = None  # Monty refused what CPython parses: it names why in the cell as written
        self._run_first(code, limits)

    def _run_first(self, code: str, limits: monty.ResourceLimits) -> None:
        session = self._pool.open(limits)
        with self._slice_on(session):
            try:
                first = session.feed_start(code, print_callback=self._output.on_print)
            except monty.MontySyntaxError as exc:
                raise GuestSyntaxError(syntax_text(exc.display("type-msg"), exc.traceback())) from None
            except monty.MontyRuntimeError as exc:
                frames = frames_of(exc)
                if frames and all(f.function_name is None for f in frames):  # the parser refused it
                    raise GuestSyntaxError(syntax_text(error_head(exc), frames)) from None
                self._advance(_raiser(exc))
                return
            self._advance(lambda: first)

    # -- slices -------------------------------------------------------------------------------------

    def start(self, deadline: float) -> Slice:
        """Report the first slice (``compile`` ran it) as the cell's first outcome."""
        deferred, self._deferred = self._deferred, None
        if deferred is not None:
            raise deferred
        if time.monotonic() >= deadline:  # as a JavaScript cell's first slice: its jobs run under the deadline
            raise GuestTimeout("cell timeout exceeded")
        return self._slice()

    def resume(self, replies: Sequence[SettledReply], deadline: float) -> Slice:
        """Settle the host's replies, then resume the parked cell with them until it waits, ends or fails."""
        for request_id, ok, payload in replies:
            self._requests.settle(request_id, ok, payload)
        if time.monotonic() >= deadline:
            raise GuestTimeout("cell timeout exceeded")
        data = self._parked
        if data is None or not self._requests.has_replies():
            return self._slice()  # nothing the parked cell awaits was answered
        self._parked = None
        # Monty's own result shape, built by HostRequests (which does not import Monty).
        settled = self._requests.take_replies()
        for reply in settled.values():
            if "return_value" in reply:
                reply["return_value"] = self._expose(reply["return_value"])
        results = cast("dict[int, monty.ExternalSettledResult]", settled)
        with self._pool.placed():
            self._resume_from(data, results)
        return self._slice()

    def _resume_from(self, data: bytes, results: dict[int, monty.ExternalSettledResult]) -> None:
        """Resume the session this cell kept if the child still holds it, else load ``data`` into a fresh one."""
        kept = self._pool.take(self)
        try:
            if kept is not None and self._resumed_kept(*kept, results):
                return
            session = self._pool.open({})
            with self._slice_on(session):
                snapshot = session.load_snapshot(data, print_callback=self._output.on_print)
                if not isinstance(snapshot, monty.FutureSnapshot):
                    raise EngineFault(f"Monty failed: a parked cell reloaded as {type(snapshot).__name__}")
                self._advance(lambda: snapshot.resume(results))
        except GuestRuntimeError:
            raise
        except monty.MontyError as exc:
            self._advance(_raiser(exc))

    def _resumed_kept(
        self, session: monty.MontySession, live: monty.FutureSnapshot, results: dict[int, monty.ExternalSettledResult]
    ) -> bool:
        """Resume the live snapshot the cell kept; False if its child had died while the cell waited (killed
        from outside: then the cell's bytes are resumed in a fresh child, as after another cell's checkout).

        A child that dies under this resume dies again under the bytes' (the retry runs from the same park,
        and only output could repeat): that second crash is the cell's failure, as it would have been."""
        with self._slice_on(session):
            try:
                first = live.resume(results)
            except monty.MontyCrashedError as exc:
                if exc.exit_status == HARD_MEMORY_EXIT or exc.timed_out:
                    raise
                return False  # the session goes back (``_slice_on``); the next checkout replaces the child
            self._advance(lambda: first)
        return True

    @contextmanager
    def _slice_on(self, session: monty.MontySession) -> Iterator[None]:
        """Run a slice on ``session``: kept checked out if the cell parked in it, else handed back."""
        self._live, self._session = None, session
        try:
            yield
        except BaseException:
            close(session)
            raise
        finally:
            self._session = None
        live, self._live = self._live, None
        if live is not None:
            self._pool.keep(self, session, live)
        else:
            self._pool.release(session)

    def _slice(self) -> Slice:
        """What the slice that just ran came to, with the requests, cancels and output it made."""
        requests, cancels = self._requests.take()
        output = self._output.take()
        if self._ended:
            if self._failure is None:
                return Returned(cancels, output)
            text, phase, code = self._failure
            return Failed(text, phase, code, cancels, output)
        outstanding = self._requests.outstanding
        if outstanding == 0:
            return stalled(cancels, output)
        # Built by HostRequests as the bridge's request heads (it does not import the bridge's types).
        return Waiting(cast("list[GuestRequest]", requests), cancels, outstanding, output)

    def request_args(self, index: int) -> str:
        return self._requests.request_args(index)

    def final_value(self, headroom_bytes: int, deadline: float) -> str:
        text, self._text = self._text, None
        if text is not None:
            return text
        value, self._value = self._value, None
        try:
            return to_json_text(value)
        except NotJson as exc:
            # JSON.stringify would fail the cell the same way: the value has no JSON form.
            raise GuestFault(f"TypeError: the cell's value: {exc}") from None
        except Exception:  # noqa: BLE001 - any value the guest made fails its own cell, nothing more
            raise GuestFault(f"TypeError: the cell's value {NO_JSON_FORM}") from None

    def heap_bytes(self) -> int:
        return self._heap

    def close(self) -> None:
        self._pool.drop(self)
        self._parked = None
        self._objects.clear()

    # -- a parked cell leaving its process ------------------------------------------------------------

    def dump(self) -> bytes:
        """The paused cell (Monty's own dump of its ``FutureSnapshot``) and what this engine keeps of it: the
        requests it awaits and the host failures it may still ask about."""
        if self._parked is None or self._ended:
            raise EngineFault("only a cell that waits on host work can be dumped")
        header = self._requests.export(SHAPE_NAMES)
        header["source"] = None if self._rewrite is None else self._rewrite.export()
        return pack_dump(dumps_text(header).encode("utf-8"), self._parked)

    def restore(self, state: bytes) -> int:
        try:
            header, self._parked = unpack_dump(state)
            self._requests.restore(header, SHAPES)
            self._rewrite = Rewrite.restored(header.get("source"))
        except ValueError as exc:  # JSONDecodeError included
            raise EngineFault(f"a dumped Python cell's state is out of shape: {exc}") from None
        self._heap = len(self._parked)
        return self._requests.outstanding

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
                    # Dumped now, though the session is kept: the cell's size is known (its heap, the
                    # snapshot cap) and the child can be handed to another cell without a word to this one.
                    self._parked = snapshot.dump()
                    self._heap = len(self._parked)
                    self._live = snapshot
                    return
                if isinstance(snapshot, monty.NameLookupSnapshot):
                    value = None if snapshot.object_id is not None else self._ns.globals.get(snapshot.variable_name)
                    # No value: the guest gets a NameError (an AttributeError for an object's attribute).
                    snapshot = snapshot.resume() if value is None else snapshot.resume(value=self._expose(value))
                elif snapshot.is_os_function:
                    snapshot = snapshot.resume_not_handled()  # no files, no environment, no sleeps
                else:
                    snapshot = snapshot.resume(self._call(snapshot))
        except monty.MontyRuntimeError as exc:
            self._finish_failed(exc)
        except monty.MontyCrashedError as exc:
            self._finish_crashed(exc)
        except GuestRuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - Monty itself failed, not the cell: only this cell is lost
            raise EngineFault(f"Monty failed: {described(exc)}") from None

    def _finish_ok(self, complete: monty.MontyComplete) -> None:
        self._output.flush_print()
        self._ended = True
        try:
            value = complete.output
            if self._rewrite is not None:
                value = self._from_text(value)
        except monty.MontyError:
            raise  # the child failed while the value was read: the slice's handlers decide (``_advance``)
        except (RuntimeError, ValueError) as exc:  # Monty's own conversion refused it (too deep)
            self._failure = uncaught(f"TypeError: the cell's value nests too deep to cross as JSON ({exc})")
            return
        except Exception:  # noqa: BLE001 - Monty has no host form of it (``type(catalog)``)
            self._failure = uncaught(f"TypeError: the cell's value {NO_JSON_FORM}")
            return
        # Calls the cell started but never awaited are dropped with it: nobody can see their outcome (a
        # JavaScript cell reports a rejection nobody handled; Python has no such notion).
        self._requests.drop_pending()
        self._value = value

    def _from_text(self, text: Any) -> object:
        """The value of a rewritten cell, whose child wrote it as JSON ``text`` (None: ``json.dumps`` refused
        it): None if the text is the host's JSON of it (kept for ``final_value``), else the value itself."""
        self._text = None if text is None else child_text(text)
        if self._text is not None:
            return None
        if self._session is None:
            raise EngineFault("Monty failed: the cell's session was gone before its value was read")
        fetched = self._session.feed_start(Rewrite.FETCH)
        if not isinstance(fetched, monty.MontyComplete):
            raise EngineFault(f"Monty failed: reading the cell's value stopped at {type(fetched).__name__}")
        return fetched.output

    def _finish_failed(self, exc: monty.MontyRuntimeError) -> None:
        self._output.flush_print()
        head = error_head(exc)
        limit = limit_error(head)
        if limit is not None:
            raise limit
        self._requests.drop_pending()
        self._ended = True
        frames = frames_of(exc)
        text = error_text(head, frames if self._rewrite is None else self._rewrite.frames(frames))
        code = self._requests.failures.code(head)
        # A host call's rejection nobody caught is phase bridge, as in JavaScript.
        self._failure = uncaught(text) if code is None else (text, "bridge", bridge_failure_code(code))

    def _finish_crashed(self, exc: monty.MontyCrashedError) -> None:
        """The Monty child died under this cell: only this cell is lost (the pool starts a new child)."""
        if exc.exit_status == HARD_MEMORY_EXIT:
            raise EngineFault(f"out of memory: Monty's worker reached its hard memory limit ({exc})")
        if exc.timed_out:
            raise GuestTimeout("cell timeout exceeded")
        self._requests.drop_pending()
        self._ended = True
        self._failure = (f"Monty's worker process died while it ran this cell: {exc}", "host", "runtime_unavailable")

    # -- the guest's external functions -----------------------------------------------------------

    def _call(self, snapshot: monty.FunctionSnapshot) -> monty.ExternalResult:
        """Answer one call of a guest-visible function: at once (output), or as a host request's future."""
        name = str(snapshot.function_name)
        target = None if snapshot.object_id is None else self._objects.get(snapshot.object_id)
        if snapshot.object_id is not None and target is None:
            return {"exception": AttributeError(f"{name}() is not a method the host serves")}
        try:
            args, kwargs = snapshot.args, snapshot.kwargs
        except (RuntimeError, ValueError) as exc:  # Monty's own conversion refused them (too deep)
            return {"exception": TypeError(f"the call's arguments nest too deep to cross as JSON ({exc})")}
        except Exception:  # noqa: BLE001 - Monty has no host form of one of them (``type(catalog)``)
            return {"exception": TypeError(f"the call's arguments: one {NO_JSON_FORM}")}
        try:
            if target is None and name in ("text", "json"):
                emit = self._output.text if name == "text" else self._output.json
                emit(*args, **kwargs)
                return {"return_value": None}
            if target is None and name == "error_info" and name not in self._ns.tools:
                return {"return_value": self._requests.failures.error_info(*args, **kwargs)}
            request = request_for(self._ns, target, name, args, kwargs)
            if request is None:
                return {"exception": NameError(f"name {name!r} is not defined")}
            if isinstance(request, list):
                return {"return_value": self._expose(request)}  # answered here: catalog.all()
            method, request_args, shape = request
            self._requests.queue(snapshot.call_id, method, request_args, shape)
            return {"future": ...}
        except (TypeError, ValueError, OverflowError) as exc:
            # The guest gets the built-in type itself (Monty knows no host subclasses).
            kind = ValueError if isinstance(exc, ValueError) else TypeError
            return {"exception": kind(str(exc))}
        except Exception as exc:  # noqa: BLE001 - an odd value in the call: the guest's error, not the worker's
            return {"exception": TypeError(f"{name}(): {described(exc)}")}

    # -- host objects -------------------------------------------------------------------------------

    def _expose(self, value: object) -> Any:
        """``value`` as the guest receives it: the namespaces' objects (in lists and dicts too) as host
        objects whose method calls come back here, by an id that names the object."""
        if isinstance(value, list):
            return [self._expose(item) for item in value]
        if isinstance(value, dict):
            return {key: self._expose(item) for key, item in value.items()}
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            return value
        named = object_id(value)
        if named is not None:
            self._objects[named] = value
        fields = [f.name for f in dataclasses.fields(value)]
        methods = [m for m in dir(type(value)) if not m.startswith("_") and m not in fields]
        return _HostObject(
            value,
            eager_attrs=[f for f in fields if f != "mcp"],
            allowed_methods=methods,
            id=named or uuid.uuid4(),
            expose=self._expose,
        )


@dataclasses.dataclass
class _HostObject(monty.ClassInstance):
    """A namespace object as the guest holds it: its fields cross at once, the nested namespaces in them
    (``MCP.server.resources``) as host objects too."""

    expose: Callable[[object], Any] = dataclasses.field(default=lambda v: v, repr=False, compare=False)

    def convert_value(self, /, name: str, value: Any) -> Any:
        return self.expose(value)


def _raiser(exc: BaseException) -> Callable[[], Snapshot]:
    def step() -> Snapshot:
        raise exc

    return step
