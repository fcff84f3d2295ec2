"""A Python cell's host requests: queued while the cell runs, handed to the worker loop by ``take``,
answered by ``settle``, and held to the same bridge caps as a JavaScript cell's.

Each request the guest makes is a Monty future keyed by Monty's call id; its arguments are encoded
once, here, and travel as text (``request_args`` hands each over once).  Replies are kept in the shape
Monty resumes a future with (``{"return_value": ...}`` or ``{"exception": ...}``); the engine, the one
module that imports Monty, hands them over.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from bridge.jsoncodec import dumps_text, loads
from bridge.messages import GuestCaps

from .values import to_json_value

#: How a request's reply becomes the guest's value (e.g. search results as catalog handles).
Shape = Callable[[object], object]

#: The host failure's fields ``error_info(e)`` answers besides ``message`` and ``code``: the properties a
#: JavaScript cell's bridge error carries (``makeError`` in guest_runtime/quickjs/prelude/requests.js).
FAILURE_FIELDS = (
    "effectStatus",
    "tool",
    "details",
    "data",
    "errorType",
    "needParam",
    "nonRetriable",
    "userMessage",
    "redirect",
    "upstream",
    "timeoutSeconds",
)
#: Host failures a cell's record keeps, most recent first, by count and by the characters of their
#: fields: a cell failing call after call holds a bounded record, not one entry per call (the oldest
#: go; such an exception then reads as the cell's own: no ``error_info``, phase guest if uncaught).
MAX_KEPT_FAILURES = 256
MAX_KEPT_FAILURE_CHARS = 1 << 20


class HostRequests:
    """The requests of one Python cell, from the guest's call to the host's reply."""

    def __init__(self, caps: GuestCaps) -> None:
        """``caps``: the cell's, as ``guest_config.read_caps`` read them from its configuration."""
        self._caps = caps
        self._next_id = 1
        self._pending: dict[int, tuple[int, Shape | None]] = {}  # request id -> (Monty call id, shape)
        self._replies: dict[int, dict[str, object]] = {}  # Monty call id -> its result, until the next slice
        self._queue: list[dict[str, object]] = []
        self._queue_args: list[str] = []
        self._taken_args: list[str] = []
        self._queued_bytes = 0
        self._cancels: list[int] = []
        self.failures = HostFailures()

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def queue(self, call_id: int, method: str, args: list[object], shape: Shape | None = None) -> None:
        """Queue one request (the guest holds a future that ``settle`` resolves).  Over a cap: ValueError."""
        self._check_counts()
        text = self._encode(args)
        self._queued_bytes += len(text)
        request_id = self._next_id
        self._next_id += 1
        self._pending[request_id] = (call_id, shape)
        self._queue.append({"id": request_id, "method": method})
        self._queue_args.append(text)

    def settle(self, request_id: int, ok: bool, payload: str | None) -> None:
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return  # a request the cell no longer waits for
        call_id, shape = entry
        if ok:
            value = None if payload is None else loads(payload)
            self._replies[call_id] = {"return_value": shape(value) if shape else value}
        else:
            text = payload or "{}"
            error = loads(text)
            exception = host_error(error)
            self.failures.record(exception, error, len(text))
            self._replies[call_id] = {"exception": exception}

    def export(self, shape_names: dict[Shape, str]) -> dict[str, object]:
        """What a dumped cell needs of these requests to go on elsewhere (``restore``): the requests it awaits,
        with the shape of each reply by name, the next id, and the host failures it may still ask about.
        Only between slices: nothing is queued and no reply waits then."""
        return {
            "next": self._next_id,
            "pending": [
                [request_id, call_id, None if shape is None else shape_names[shape]]
                for request_id, (call_id, shape) in self._pending.items()
            ],
            "failures": self.failures.export(),
        }

    def restore(self, state: dict[str, object], shapes: dict[str, Shape]) -> None:
        """Take up what ``export`` wrote (``ValueError`` for anything out of that shape)."""
        next_id, pending, failures = state.get("next"), state.get("pending"), state.get("failures")
        if type(next_id) is not int or not isinstance(pending, list) or not isinstance(failures, list):
            raise ValueError("the requests' state is out of shape")
        for entry in pending:
            if not (isinstance(entry, list) and len(entry) == 3 and all(type(n) is int for n in entry[:2])):
                raise ValueError("a pending request's state is out of shape")
            request_id, call_id, shape = entry
            if shape is not None and shape not in shapes:
                raise ValueError(f"unknown reply shape {shape!r}")
            self._pending[request_id] = (call_id, None if shape is None else shapes[shape])
        self._next_id = next_id
        self.failures.restore(failures)

    def take_replies(self) -> dict[int, dict[str, object]]:
        replies, self._replies = self._replies, {}
        return replies

    def has_replies(self) -> bool:
        return bool(self._replies)

    def drop_pending(self) -> None:
        """The cell ended: calls it started but never awaited are cancelled (nobody can see their outcome)."""
        self._cancels.extend(self._pending)
        self._pending.clear()

    def take(self) -> tuple[list[dict[str, object]], list[int]]:
        """The requests queued and the cancels made since the last take; their arguments move to ``request_args``."""
        taken = self._queue, self._cancels
        self._taken_args, self._queue_args = self._queue_args, []
        self._queue, self._queued_bytes, self._cancels = [], 0, []
        return taken

    def request_args(self, index: int) -> str:
        if index >= len(self._taken_args):
            return "[]"
        text, self._taken_args[index] = self._taken_args[index], ""  # handed over once
        return text

    def _check_counts(self) -> None:
        caps = self._caps
        if len(self._pending) >= caps["maxPendingRequests"]:
            raise ValueError(
                f"too many host requests pending (limit {caps['maxPendingRequests']}: tool calls, sleeps and "
                "yield_control all count); await some before starting more"
            )
        if len(self._queue) >= caps["maxQueuedRequests"]:
            raise ValueError(
                f"too many host requests queued at once (limit {caps['maxQueuedRequests']}); "
                "await some before starting more"
            )

    def _encode(self, args: list[object]) -> str:
        caps = self._caps
        try:
            data, _ = to_json_value(args, max_values=caps["maxRequestValues"])
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
        return text


def host_error(err: object) -> Exception:
    """A host failure as the Python exception the guest catches; a stable code ends its message: ``(code: ...)``.

    Monty's exceptions are the built-in types, which carry no attributes: the code travels in the text,
    and the cell reads every field with ``error_info(e)`` (``HostFailures``).
    """
    fields = err if isinstance(err, dict) else {}
    message = _message(fields)
    name = fields.get("name")
    code = fields.get("code")
    kinds: dict[object, type[Exception]] = {"TypeError": TypeError, "RangeError": ValueError}
    kind = kinds.get(name, RuntimeError)
    return kind(f"{message} (code: {code})" if isinstance(code, str) and code else message)


def _message(fields: dict[str, object]) -> str:
    message = fields.get("message")
    return message if isinstance(message, str) else "host request failed"


def exception_head(exc: BaseException) -> str:
    """``Name: message``: how Monty names an exception, and all that tells a host failure from another."""
    return f"{type(exc).__name__}: {exc}"


class HostFailures:
    """The host failures raised in one cell, by the ``Name: message`` of the exception the guest got.

    Monty's exceptions are the built-in types with a message and nothing else: no attribute, no identity
    that survives a pause.  So the fields of a host failure (its code, the tool, ...) are kept here, and an
    exception the cell hands back (``error_info(e)``) or that ends the cell uncaught is recognised by its
    head.  A cell that raises its own exception with the very same type and message is taken for the
    host's: it can only mislead itself.
    """

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[dict[str, object], int]] = OrderedDict()
        self._chars = 0

    def record(self, exception: BaseException, error: object, chars: int) -> None:
        """``error`` (the host's ReplyError, ``chars`` characters of JSON) was raised as ``exception``."""
        fields = error if isinstance(error, dict) else {}
        info: dict[str, object] = {"message": _message(fields), "code": fields.get("code", "")}
        info.update((name, fields[name]) for name in FAILURE_FIELDS if fields.get(name) is not None)
        head = exception_head(exception)
        old = self._kept.pop(head, None)
        self._chars += chars - (old[1] if old else 0)
        self._kept[head] = (info, chars)
        while len(self._kept) > MAX_KEPT_FAILURES or (self._chars > MAX_KEPT_FAILURE_CHARS and len(self._kept) > 1):
            _, (_, dropped) = self._kept.popitem(last=False)
            self._chars -= dropped

    def export(self) -> list[list[object]]:
        """The failures kept, oldest first: ``[head, fields, chars]`` each."""
        return [[head, info, chars] for head, (info, chars) in self._kept.items()]

    def restore(self, kept: list[object]) -> None:
        """Take up what ``export`` wrote (``ValueError`` for anything out of that shape)."""
        for entry in kept:
            if not (
                isinstance(entry, list)
                and len(entry) == 3
                and isinstance(entry[0], str)
                and isinstance(entry[1], dict)
                and type(entry[2]) is int
            ):
                raise ValueError("a kept host failure is out of shape")
            head, info, chars = entry
            self._kept[head] = (info, chars)
            self._chars += chars

    def info(self, head: str) -> dict[str, object] | None:
        """The fields of the host failure raised as an exception with this head, if it is one (a fresh copy)."""
        kept = self._kept.get(head)
        return None if kept is None else dict(kept[0])

    def error_info(self, error: object) -> dict[str, object] | None:
        """``error_info(e)``: the fields of the host failure ``e`` is (its ``code``, ``tool``, ...), or None.

        What a JavaScript cell reads as the properties of the caught error (``e.code``); Monty's exceptions
        carry no attributes, so a Python cell asks for them.
        """
        if not isinstance(error, BaseException):
            raise TypeError(f"error_info(e) takes a caught exception, not {type(error).__name__}")
        return self.info(exception_head(error))

    def code(self, head: str) -> str | None:
        """The code of the host failure raised as an exception with this head ("" for none), None if not one."""
        kept = self._kept.get(head)
        if kept is None:
            return None
        code = kept[0]["code"]
        return code if isinstance(code, str) else ""
