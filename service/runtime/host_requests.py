"""One cell's outstanding host work: dispatch, settle, the inbox, and requests for the caller.

A guest request becomes a ``Pending`` entry and, unless the API caller must answer it (client
tools, ``yield_control``), a handler task.  On Python 3.12 and later that task starts eagerly: its
handler runs at once, as that task, up to its first wait, so a handler that finishes without waiting
(most tool calls) has settled before ``dispatch`` returns and never waits for a turn of the loop.
When a handler finishes, its reply is encoded once, charged to the cell's inbox allowance (or
replaced by the fixed "program-data budget exceeded" error) and queued in settlement order until
the cell's worker can take it.  Bytes handed to the worker are released when the worker reports
back, i.e. once the guest consumed them.

A request's JSON arguments arrive as the bytes the guest wrote and stay encoded until its handler
parses them (once); they are checked before that (``max_request_bytes``, ``max_request_values``).
They are held on the host until the request settles (a native tool holds them parsed for as long as
it runs; a client tool call's input waits for the API caller, maybe for as long as the cell stays
parked), so they are charged to the same allowance, and to the tenant's held-bytes quota, from
arrival to settlement, cancel or the cell's end, at what they cost: parsed, reckoned from their
bytes before they are parsed (``bridge.json_cost``), many times their bytes for small values;
encoded (their bytes) once a request holds them only encoded (a client tool call's input, an input
waiting for approval).  Arguments that do not fit are refused in the guest, catchably, before they
are parsed, and the cell goes on.

A handler may ask the API caller to approve its call (``HostCall.ask_approval``): the request then
parks the cell as an ``approval`` entry while its handler task waits, and goes on in that same task
once approved, so nothing of the cell is ever run twice.  A request waiting for approval has started
no side effect: ``side_effects_started`` counts it only once approved.
"""

from __future__ import annotations

import asyncio
import functools
import re
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from bridge import jsoncodec
from bridge.inbox import (
    INBOX_EXCEEDED_MESSAGE,
    HeldAccount,
    InboxAllowance,
    arguments_exceeded_message,
    tenant_held_exceeded_message,
)
from bridge.json_cost import parsed_cost
from bridge.json_types import JsonValue
from bridge.json_values import count_values, over_cap_message
from bridge.messages import Reply
from guest_runtime.guest_config import MAX_REQUEST_VALUES
from service.tracing import end_call

from .clocks import UNTIMED_METHODS, WaitClock
from .dispatch import Dispatcher, GuestError, Handler, HostCall, NeedsCaller, RawJson

if TYPE_CHECKING:
    from service.tracing import CellTrace

    from .call_log import CallLog

#: One request's handler run, from its start to its settlement.
HandlerRun = Coroutine[object, object, None]
#: One reply for the worker: the settle entry, and its JSON payload when it succeeded.
ReadyReply = tuple[Reply, bytes | None]
#: Arguments this small (a timer's delay, a store key) are charged but never refused: like the
#: request's own bookkeeping they are bounded by the request count caps, and refusing a timer would
#: lose its callback.
UNREFUSED_ARGS_BYTES = 64


@dataclass
class Pending:
    """A guest request that has not been settled yet."""

    request_id: int
    method: str
    #: A tool or MCP call's first bytes of encoded arguments, where the callable's name is: read only
    #: when shown (the caller's pending list, a trace), not on every call; never more than the bytes charged.
    head: bytes = b""
    task: asyncio.Task[None] | None = None
    caller: NeedsCaller | None = None  # set when the API caller must answer it
    args_bytes: int = 0  # size of the encoded arguments (traces)
    began: float = 0.0  # its time.perf_counter() at dispatch, while the cell keeps a call log
    held: int = 0  # inbox bytes charged for what the request holds: its arguments parsed, or its input encoded
    decision: asyncio.Future[tuple[bool, str | None]] | None = None  # the approval its handler awaits
    # Its ``codemode.call`` span while tracing is on (an OpenTelemetry span: only service.tracing names that type).
    span: Any = None
    #: Its encoded arguments, kept (``HostRequests.keep_args``) until its handler asks for approval and is
    #: answered, so a cell parked on the approval can be taken up elsewhere and the call run there
    #: (``carried``, ``take_up``); charged while the request waits for the approval.
    raw: bytes = b""

    @property
    def label(self) -> str | None:
        """The callable the request names, for the caller's pending list and traces."""
        return call_label(self.method, self.head)

    def public(self) -> dict[str, object]:
        """What the API caller is shown of the request (a held input is an encoded JSON fragment)."""
        out: dict[str, object] = {"id": f"req_{self.request_id}", "method": self.method}
        if self.caller is not None and self.caller.kind == "approval":
            out.update(method="approval", tool=self.caller.tool, input=self.caller.input)
            if self.caller.reason is not None:
                out["reason"] = self.caller.reason
        elif self.caller is not None and self.caller.kind == "client_tool":
            out.update(tool=self.caller.tool, name=self.caller.name, input=self.caller.input)
        elif (label := self.label) is not None:
            out["tool"] = label
        return out


class HostRequests:
    """The pending requests and settled replies of one cell."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        inbox_bytes: int,
        max_in_flight: int,
        make_call: Callable[[int, str, bytes], HostCall],
        *,
        max_request_bytes: int = 256 * 1024 * 1024,
        max_request_values: int = MAX_REQUEST_VALUES,
        account: HeldAccount | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.inbox = InboxAllowance(inbox_bytes, account)
        self.max_in_flight = max_in_flight
        self.max_request_bytes = max_request_bytes
        self.max_request_values = max_request_values
        self.make_call = make_call
        self.wake = asyncio.Event()  # set whenever a reply is ready or the caller is needed
        # Held, not asked for per request: on Python 3.11 each get_running_loop() is a getpid() system call.
        self._loop = asyncio.get_running_loop()
        self._effects_started = False
        self._unconfirmed: set[int] = set()  # side-effect requests that may still ask for approval
        self.count = 0
        self._pending: dict[int, Pending] = {}
        self._ready: list[ReadyReply] = []
        self._charged: dict[int, int] = {}  # request id -> inbox bytes of its queued reply
        # Ids whose handler task runs (a dropped one counts no more); the leg reads it, only this class changes it.
        self.in_flight: set[int] = set()
        self.waiting = WaitClock()  # time with host work in flight (telemetry's tool_wait_ms)
        self._closed = False
        self.trace: CellTrace | None = None  # once a leg is traced; None while tracing is off
        self.log: CallLog | None = None  # the cell's call log, when its exec asked for one
        self.keep_args = False  # the cell may be written out when parked: keep what an approval reruns

    # ---- questions the leg loop asks -------------------------------------------------------------

    @property
    def has_ready(self) -> bool:
        return bool(self._ready)

    @property
    def needs_caller(self) -> bool:
        return any(p.caller is not None for p in self._pending.values())

    def reason(self) -> str:
        pend = list(self._pending.values())
        if pend and all(p.caller is not None and p.caller.kind == "yield" for p in pend):
            return "yield"
        return "pending_tools"

    def public(self) -> list[dict[str, object]]:
        return [p.public() for p in self._pending.values()]

    @property
    def side_effects_started(self) -> bool:
        """Whether a request that may have side effects was dispatched (approved, if it asked).

        A request whose handler has not yet said whether it needs approval counts as started, and
        once reported true this stays true: an envelope never takes back what an earlier one said.
        """
        if self._unconfirmed:
            self._effects_started = True
        return self._effects_started

    def side_effects_may_have_started(self) -> bool:
        """``side_effects_started`` without committing to it: for a background leg's stop nobody is shown."""
        return self._effects_started or bool(self._unconfirmed)

    def check_answers(
        self, tool_results: Sequence[Mapping[str, object]], approvals: Sequence[Mapping[str, object]]
    ) -> tuple[str, str] | None:
        """The problem with caller-supplied answers (by index) and the field it is in, or None when all apply."""
        for field, answers, kind, what in (
            ("tool_results", tool_results, "client_tool", "pending client tool call"),
            ("approvals", approvals, "approval", "pending approval"),
        ):
            seen: set[int] = set()
            for i, answer in enumerate(answers):
                number = request_number(answer.get("id"))
                p = self._pending.get(number)
                if p is None or p.caller is None or p.caller.kind != kind:
                    return f"{field}[{i}].id {answer.get('id')!r} is not a {what} of this cell", field
                if number in seen:
                    return f"{field}[{i}].id {answer.get('id')!r} is answered twice in this body; answer it once", field
                seen.add(number)
        return None

    # ---- requests in ---------------------------------------------------------------------------

    def dispatch(self, request_id: int, method: str, args: bytes | list[JsonValue]) -> None:
        """Start the handler of one guest request, its arguments (JSON bytes) checked and charged to the inbox."""
        raw = args if isinstance(args, bytes) else jsoncodec.dumps(args)
        pending = Pending(request_id, method, head=raw[:LEADING_BYTES] if method in LABELLED else b"")
        self._pending[request_id] = pending
        self.count += 1
        if self.log is not None:
            pending.began = time.perf_counter()
        if self.trace is not None:
            pending.span = self.trace.call(method, pending.label)
        route = self.dispatcher.route(method)
        if route is None:
            self.settle(request_id, False, {"message": f"unknown host method {method!r}", "code": "invalid_input"})
            return
        if len(self.in_flight) >= self.max_in_flight:
            self.settle(
                request_id,
                False,
                {
                    "message": f"too many host requests in flight (limit {self.max_in_flight}); "
                    "await some before starting more",
                    "code": "invalid_input",
                    "name": "RangeError",
                },
            )
            return
        refusal = self._charge_args(pending, raw)
        if refusal is not None:
            self.settle(request_id, False, refusal)
            return
        if route.side_effects:
            self._unconfirmed.add(request_id)
            if self.keep_args:
                pending.raw = raw
        self.in_flight.add(request_id)
        if method not in UNTIMED_METHODS:
            self.waiting.start(request_id)
        call = self.make_call(request_id, method, raw)
        call.ask_approval = functools.partial(self._ask_approval, request_id)
        call.abandon = functools.partial(self._abandon, request_id)
        pending.task = _start_task(self._loop, self._handle(route.handler, call))

    def _charge_args(self, pending: Pending, raw: bytes) -> dict[str, object] | None:
        """Check the request's encoded arguments and charge them at their parsed cost (its handler parses
        them at once); return the guest error if they do not fit."""
        refusal = check_request(raw, self.max_request_bytes, self.max_request_values)
        if refusal is not None:
            return refusal.payload()
        size = len(raw)
        pending.args_bytes = size
        if size <= UNREFUSED_ARGS_BYTES:
            cost = parsed_cost(raw)
            self.inbox.charge(cost)
        elif size > self.inbox.remaining:  # they cost at least their bytes: refused without a reckoning
            return _budget_refusal(self.inbox, None, "cell", size).payload()
        else:
            cost = parsed_cost(raw)
            full = self.inbox.try_admit(cost)
            if full is not None:
                return _budget_refusal(self.inbox, cost, full, size).payload()
        pending.held = cost
        return None

    async def _handle(self, handler: Handler, call: HostCall) -> None:
        try:
            value = await handler(call)
        except NeedsCaller as need:
            self._await_caller(call.request_id, need)
            return
        except GuestError as exc:
            self.settle(call.request_id, False, exc.payload())
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a host bug must not take the cell or service down
            self.settle(
                call.request_id,
                False,
                {"message": f"host request {call.method} failed: {type(exc).__name__}: {exc}", "code": "tool_error"},
            )
            return
        finally:
            self.in_flight.discard(call.request_id)
            self.waiting.stop(call.request_id)
        self.settle(call.request_id, True, value)

    def _await_caller(self, request_id: int, need: NeedsCaller) -> None:
        """Hand the request to the API caller, keeping only what it is shown.

        The input stays encoded until then: its parsed form, and the handler frames the exception
        still references, would hold many times the bytes charged for it.
        """
        p = self._pending.get(request_id)
        if p is None:
            return
        p.raw = b""  # the caller answers it: nothing of it runs again
        held = None
        if need.kind == "client_tool":
            try:
                encoded = jsoncodec.dumps_kept(need.input)
            except TypeError as exc:
                self.settle(
                    request_id,
                    False,
                    {"message": f"client tool input is not JSON: {exc}", "code": "invalid_input", "name": "TypeError"},
                )
                return
            held = jsoncodec.fragment(encoded)
            # Its bytes are all it holds now: charged in place of the parsed arguments (a before-hook's
            # rewrite may be larger: trusted plugin code, charged without a refusal).
            self.inbox.release(p.held)
            p.held = len(encoded)
            self.inbox.charge(p.held)
        p.caller = NeedsCaller(need.kind, tool=need.tool, input=held, reason=need.reason, name=need.name)
        self.wake.set()

    async def _ask_approval(self, request_id: int, tool: str, input: object, reason: str) -> tuple[bool, str | None]:
        """Park the request as an approval entry until the API caller answers; (approved, reason).

        ``input`` is best given as its compact JSON (bytes): while the caller decides, the request
        holds only these bytes, which take over the charge of its arguments (a handler that passes
        bytes holds no parsed copy meanwhile, see ``CallSession``), and once approved it is charged
        the input's parsed cost again (the handler parses it to run the call; refused like arguments
        that do not fit).  A handler that passes objects keeps them meanwhile: its arguments stay
        charged, and the bytes shown beside them.
        """
        p = self._pending.get(request_id)
        if p is None:
            return False, "the request is no longer pending"
        try:
            raw = input if isinstance(input, bytes) else jsoncodec.dumps_kept(input)
        except TypeError as exc:
            raise GuestError(f"the input of {tool} is not JSON: {exc}", "invalid_input", name="TypeError") from None
        encoded_only = isinstance(input, bytes)
        kept = 0 if encoded_only else p.held
        _recharge(self.inbox, p, kept + len(raw) + len(p.raw), len(raw))
        held = jsoncodec.fragment(raw)
        decision: asyncio.Future[tuple[bool, str | None]] = self._loop.create_future()
        p.caller = NeedsCaller("approval", tool=tool, input=held, reason=reason)
        p.decision = decision
        self._unconfirmed.discard(request_id)  # nothing is dispatched unless it is approved
        self.wake.set()
        try:
            approved, why = await decision
        finally:
            p.caller, p.decision, p.raw = None, None, b""
        if approved and self._pending.get(request_id) is p:
            _recharge(self.inbox, p, parsed_cost(raw) if encoded_only else kept, len(raw))
        return approved, why

    def settle_answers(
        self, tool_results: Sequence[Mapping[str, object]], approvals: Sequence[Mapping[str, object]]
    ) -> None:
        """A wait's answers (checked before): client tool results ``{id, ok, value?, error?}``, approvals
        ``{id, approve, reason?}``; and every ``yield_control`` resumes."""
        for result in tool_results:
            request_id = request_number(result.get("id"))
            if result.get("ok"):
                self.settle(request_id, True, result.get("value"))
                continue
            err = result.get("error")
            if isinstance(err, dict):
                message = err.get("message", "client tool failed")
            else:
                message = err if isinstance(err, str) else "client tool failed"
            self.settle(request_id, False, {"message": str(message), "code": "tool_error"})
        for answer in approvals:
            p = self._pending.get(request_number(answer.get("id")))
            if p is None or p.decision is None or p.decision.done():
                continue
            approved = bool(answer.get("approve"))
            if approved:
                self._effects_started = True  # the approved call is dispatched now
            p.caller = None  # its handler goes on: the leg waits for it like any host work
            reason = answer.get("reason")
            p.decision.set_result((approved, reason if isinstance(reason, str) and reason else None))
        for p in list(self._pending.values()):
            if p.caller is not None and p.caller.kind == "yield":
                self.settle(p.request_id, True, {"status": "yielded", "reason": p.caller.reason})

    def settle(self, request_id: int, ok: bool, value: object) -> None:
        """Queue one reply for the guest, charging it to the inbox (or refusing it)."""
        pending = self._pending.pop(request_id, None)
        self._confirm(request_id)
        if pending is None or self._closed:
            return  # cancelled timer, or a late completion after the cell ended: discarded
        self.inbox.release(pending.held)  # the reply, charged below, takes over from the arguments
        try:
            raw = value.data if isinstance(value, RawJson) else jsoncodec.dumps(value)
        except TypeError as exc:
            ok, raw = False, jsoncodec.dumps({"message": f"host reply is not JSON: {exc}", "code": "tool_error"})
        size = len(raw)  # the inbox counts UTF-8 bytes
        full = self.inbox.try_admit(size)
        if full is None:
            self._charged[request_id] = size
        else:
            ok = False
            message = _budget_message(self.inbox, size, full)
            raw = jsoncodec.dumps({"message": message, "code": "program_data_budget"})
        reply: Reply = {"id": request_id, "ok": ok}
        if ok:
            self._ready.append((reply, raw))
        else:
            reply["error"] = jsoncodec.loads(raw)
            self._ready.append((reply, None))
        if pending.span is not None:
            end_call(pending.span, pending.args_bytes, size, reply)
        if self.log is not None:
            outcome = "ok" if ok else str(cast("dict[str, object]", reply["error"]).get("code") or "error")
            self.log.add(request_id, pending.method, pending.label, pending.began, (pending.args_bytes, size), outcome)
        self.wake.set()

    def drop(self, request_id: int) -> None:
        """The guest no longer waits for this request (a cleared timer): cancel its task."""
        pending = self._pending.pop(request_id, None)
        self._confirm(request_id)
        self.in_flight.discard(request_id)  # at once: the guest may start a new one in the same frame
        self.waiting.stop(request_id)
        if pending is None:
            return
        self.inbox.release(pending.held)
        if pending.task is not None:
            pending.task.cancel()
        if pending.span is not None:
            end_call(pending.span, pending.args_bytes, None, outcome="dropped")
        if self.log is not None:
            self.log.add(
                request_id, pending.method, pending.label, pending.began, (pending.args_bytes, None), "dropped"
            )

    def _abandon(self, request_id: int, error: Mapping[str, object]) -> None:
        """Reject the request with ``error`` now and cancel its task again; a late result is dropped."""
        pending = self._pending.get(request_id)
        if pending is None:
            return
        self.in_flight.discard(request_id)
        self.waiting.stop(request_id)
        self.settle(request_id, False, error)
        if pending.task is not None:
            pending.task.cancel()

    def _confirm(self, request_id: int) -> None:
        """The request settled or was dropped without waiting for approval: its effects count."""
        if request_id in self._unconfirmed:
            self._unconfirmed.discard(request_id)
            self._effects_started = True

    # ---- replies out ---------------------------------------------------------------------------

    def take_ready(self) -> tuple[list[ReadyReply], int]:
        """All queued replies in settlement order, and the inbox bytes they hold."""
        ready, self._ready = self._ready, []
        charged = self._charged
        held = 0
        for reply, _ in ready:  # a loop, not a generator: most turns deliver one reply
            held += charged.pop(reply["id"], 0)
        return ready, held

    def close(self) -> None:
        """The cell ended: cancel every task and release the whole inbox."""
        self._closed = True
        # Requests still running count as started; those waiting for approval never ran.
        self._effects_started = self.side_effects_started
        self._unconfirmed.clear()
        for p in self._pending.values():
            if p.task is not None:
                p.task.cancel()
            if p.span is not None:
                end_call(p.span, p.args_bytes, None, outcome="cancelled")
        self._pending.clear()
        self._ready.clear()
        self._charged.clear()
        self.inbox.release_all()
        self.waiting.stop_all()


def call_label(method: str, raw: bytes) -> str | None:
    """The callable a tool or MCP request names (``MCP.<server>.<tool>``), read from its encoded arguments."""
    if method == "tool":
        names = leading_strings(raw, 1)
        return names[0] if names else None
    if method == "mcp.call":
        names = leading_strings(raw, 2)
        return f"MCP.{names[0]}.{names[1]}" if len(names) == 2 else None
    return None


def request_number(public_id: object) -> int:
    """``req_<n>`` -> n (or -1)."""
    if isinstance(public_id, str) and public_id.startswith("req_") and public_id[4:].isdigit():
        return int(public_id[4:])
    return -1


if sys.version_info >= (3, 12):

    def _start_task(loop: asyncio.AbstractEventLoop, work: HandlerRun) -> asyncio.Task[None] | None:
        """Run ``work`` as a task started eagerly; None when it finished at once (nothing to cancel).

        The handler runs as its own task from its first line (``asyncio.current_task()``, and the
        timeouts and cancel scopes built on it, see that task), in the read callback that parsed its
        request or the leg that took it."""
        task = asyncio.Task(work, loop=loop, eager_start=True)
        return None if task.done() else task

else:

    def _start_task(loop: asyncio.AbstractEventLoop, work: HandlerRun) -> asyncio.Task[None] | None:
        """Run ``work`` as a task from the loop's next turn (Python 3.11 has no eager start)."""
        return loop.create_task(work)


def _budget_message(inbox: InboxAllowance, size: int, full: str) -> str:
    """Why a reply of ``size`` bytes fits neither the cell's allowance nor its tenant's quota."""
    account = inbox.account
    if full == "tenant" and account is not None:
        return tenant_held_exceeded_message(size, account)
    return INBOX_EXCEEDED_MESSAGE


def _recharge(inbox: InboxAllowance, pending: Pending, cost: int, size: int) -> None:
    """Charge ``cost`` for what ``pending`` holds from now on instead of its charge so far (a
    ``GuestError`` when it does not fit: the request then holds nothing charged)."""
    inbox.release(pending.held)
    pending.held = 0
    full = inbox.try_admit(cost)
    if full is not None:
        raise _budget_refusal(inbox, cost, full, size)
    pending.held = cost


def _budget_refusal(inbox: InboxAllowance, cost: int | None, full: str, size: int) -> GuestError:
    """The guest error of arguments (``size`` bytes encoded, ``cost`` bytes held; None: not reckoned, their
    bytes alone do not fit) that fit neither the cell's allowance nor its tenant's quota."""
    account = inbox.account
    if full == "tenant" and account is not None:
        message = tenant_held_exceeded_message(size if cost is None else cost, account)
    else:
        message = arguments_exceeded_message(size, cost, inbox.capacity, inbox.used)
    return GuestError(message, "program_data_budget", name="RangeError")


# ---- the caps the prelude enforces, enforced again here ----------------------------------------
#
# The caps the guest prelude enforces, enforced again where guest requests reach the host.
#
# The prelude refuses excess requests before they leave the guest, but it runs inside the guest's
# engine; a guest that gets around it (an engine bug, a prelude it managed to reconfigure) meets
# the same caps here, as the same kind of catchable rejection, so no cap rests on code the guest
# can reach.  Arguments are checked while still encoded (size, then values) and parsed only for
# their handler.  Pending requests in flight are capped in ``HostRequests.dispatch``; output sizes by
# ``bridge.output``; a burst larger than one frame never arrives (the frame cap).

#: Leading string elements of an argument array (a tool's or an MCP server's name), looked for in its first bytes.
_FIRST = re.compile(rb'\s*\[\s*("(?:[^"\\]|\\.)*")')
_NEXT = re.compile(rb'\s*,\s*("(?:[^"\\]|\\.)*")')
LEADING_BYTES = 4096
#: The methods whose first arguments name a callable (``call_label``).
LABELLED = frozenset({"tool", "mcp.call"})


def leading_strings(raw: bytes, count: int) -> list[str]:
    """The first ``count`` elements of an encoded argument array, where they are strings (names for
    the caller's pending list and for traces), read from its first bytes without parsing the rest."""
    head = raw[:LEADING_BYTES]
    found: list[str] = []
    pos = 0
    while len(found) < count:
        match = (_NEXT if found else _FIRST).match(head, pos)
        if match is None:
            break
        try:
            found.append(jsoncodec.loads(match.group(1)))
        except jsoncodec.JSONDecodeError:
            break
        pos = match.end()
    return found


def check_request(raw: bytes, max_request_bytes: int, max_request_values: int) -> GuestError | None:
    """Why the host refuses a guest request's JSON arguments before parsing them (None: within caps).

    Both checks cost a few passes over the bytes in C: the size, then the values they hold.
    """
    if len(raw) > max_request_bytes:
        return GuestError(
            f"request arguments are {len(raw)} bytes of JSON, over the {max_request_bytes}-byte "
            "max_request_bytes cap; pass less data per call",
            code="invalid_input",
            name="RangeError",
        )
    if count_values(raw, max_request_values) > max_request_values:
        # The same words as the prelude's refusal (guest_runtime/quickjs/prelude/requests.js).
        return GuestError(over_cap_message(max_request_values, "request arguments hold"), "invalid_input", "RangeError")
    return None
