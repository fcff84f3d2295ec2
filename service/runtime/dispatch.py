"""The dispatch seam: guest request method -> host handler.

Every guest request (``setTimeout`` -> ``sleep``, ``yield_control`` -> ``yield``, tool calls,
catalog, results, store, MCP, API files) arrives as ``(method, args)`` and is routed here.
A handler is an ``async`` function of a ``HostCall``; what it returns is the JSON reply, what
it raises as ``GuestError`` becomes a rejected ``Error`` in the guest (with ``code``), and
``NeedsCaller`` hands the request to the API caller (client tools, yields).  Anything else a
handler raises is a host bug: the guest sees a sanitised ``tool_error`` and the cell goes on.
A handler whose call needs a person's approval awaits ``call.ask_approval(tool, input, reason)``
(``input`` best as its compact JSON bytes, so nothing parsed is held while a person decides):
the cell parks with an ``approval`` entry and the handler goes on (or not) with the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from bridge import jsoncodec
from bridge.json_types import JsonValue
from bridge.json_values import nested_deeper_than
from bridge.messages import GuestTools

from .spec import CellSpec, Telemetry

NOT_SOUND = (
    f"request arguments are nested too deep or are not JSON; values may nest at most "
    f"{jsoncodec.MAX_NESTING} levels of arrays/objects"
)


# Not a ServiceError: a control-flow signal from a handler to the dispatcher, which turns it into
# the guest's rejected Error (data, never an HTTP answer).  Its code is chosen per raise, usually
# the code of the tools/mcp/stores error it translates.
class GuestError(Exception):
    """Raised by a handler to reject the guest's promise with an Error carrying ``code``."""

    def __init__(
        self, message: str, code: str = "tool_error", name: str = "Error", extra: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name
        self.extra = extra or {}

    def payload(self) -> dict[str, object]:
        # extra: effectStatus, tool, details, data — copied onto the guest's Error object
        return {**self.extra, "message": self.message, "code": self.code, "name": self.name}


class RawJson:
    """A handler result that is already compact JSON (UTF-8 bytes): sent to the guest as is."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


# Not a ServiceError: a control-flow signal that parks the cell; nothing failed.
class NeedsCaller(Exception):
    """Raised by a handler when the API caller must answer this request (it parks the cell)."""

    def __init__(
        self,
        kind: str,
        *,
        tool: str | None = None,
        input: object = None,
        reason: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(kind)
        self.kind = kind  # "yield" | "client_tool" | "approval"
        self.tool = tool  # the callable name the guest called
        self.input = input
        self.reason = reason
        self.name = name  # client tools: the name the caller declared


@dataclass(eq=False)
class CellContext:
    """One cell as the host-request handlers see it: what its exec fixed, what they count and mark.

    ``tools`` is the handlers' own per-cell state, made before the cell runs by the preparer
    (``service.capabilities.cell_tools.CellTools``); ``guest_config`` is what the prelude turns into
    the guest's globals.
    """

    id: str
    spec: CellSpec
    telemetry: Telemetry = field(default_factory=Telemetry)
    #: The cell has seen network-derived data: its model-facing text is wrapped as untrusted.
    network_content: bool = False
    tools: object = None
    guest_config: GuestTools | None = None


@dataclass
class HostCall:
    """One guest request as a handler sees it.

    Its arguments arrive as the JSON text the guest wrote (``raw``) and are parsed on first use
    (``args``, kept for the call) or handed over for good (``take_args``: the call keeps no parsed
    copy, so a handler that waits, e.g. for an approval, can hold them encoded meanwhile).
    """

    cell: CellContext
    request_id: int
    method: str
    raw: bytes
    #: (tool, input, reason) -> (approved, the approver's reason); parks the cell until answered.  The
    #: input is best its compact JSON (bytes): then the request holds only those bytes meanwhile.
    ask_approval: Callable[[str, object, str], Awaitable[tuple[bool, str | None]]] | None = None
    #: Rejects the guest's promise with this error payload now, leaving the handler's task behind
    #: (cancelled; whatever it returns later is dropped): for a call that ignores its cancellation.
    abandon: Callable[[Mapping[str, object]], None] | None = None
    #: What the call is, for the caller's list of pending calls (``tool``): set by handlers that know.
    label: str | None = None
    _args: list[JsonValue] | None = field(default=None, repr=False)

    @property
    def args(self) -> list[JsonValue]:
        """The arguments as Python objects (parsed once; a ``GuestError`` if they are not sound JSON)."""
        if self._args is None:
            self._args = parse_request(self.raw)
        return self._args

    def take_args(self) -> list[JsonValue]:
        """The arguments as Python objects, handed over for good: the call keeps neither them nor their bytes."""
        args, self._args, self.raw = self.args, None, b""
        return args


def parse_request(raw: bytes) -> list[JsonValue]:
    """A guest request's argument array as Python objects; a ``GuestError`` if it is not JSON or too deep."""
    try:
        args = jsoncodec.loads(raw)
    except jsoncodec.JSONDecodeError:
        raise GuestError(NOT_SOUND, code="invalid_input", name="TypeError") from None
    if nested_deeper_than(args, jsoncodec.MAX_NESTING, raw):
        raise GuestError(NOT_SOUND, code="invalid_input", name="TypeError")
    return args if isinstance(args, list) else [args]


Handler = Callable[[HostCall], Awaitable[object]]
Finalizer = Callable[[CellContext, bool], Awaitable[list[str]]]


@dataclass(frozen=True)
class Route:
    handler: Handler
    #: Timers do not start side effects: they leave ``bridge_dispatch_started`` false.
    side_effects: bool = True


@dataclass
class Dispatcher:
    """Method table plus the hooks that run when a cell ends."""

    routes: dict[str, Route] = field(default_factory=dict)
    finalizers: list[Finalizer] = field(default_factory=list)

    def register(self, method: str, handler: Handler, *, side_effects: bool = True) -> None:
        self.routes[method] = Route(handler, side_effects)

    def route(self, method: str) -> Route | None:
        return self.routes.get(method)

    def on_finish(self, finalizer: Finalizer) -> None:
        """Run ``finalizer(cell, completed)`` when a cell ends; it returns envelope warnings."""
        self.finalizers.append(finalizer)


async def _sleep(call: HostCall) -> None:
    import asyncio

    ms = call.args[0] if call.args and isinstance(call.args[0], int | float) else 0
    await asyncio.sleep(max(float(ms), 0.0) / 1000)
    return None


async def _yield(call: HostCall) -> None:
    reason = call.args[0] if call.args and isinstance(call.args[0], str) else None
    raise NeedsCaller("yield", reason=reason)


def base_dispatcher() -> Dispatcher:
    """A dispatcher with the built-in methods: timers and ``yield_control``."""
    d = Dispatcher()
    d.register("sleep", _sleep, side_effects=False)
    d.register("yield", _yield, side_effects=False)
    return d
