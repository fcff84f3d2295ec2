"""A Python cell's host requests: queued while the cell runs, handed to the worker loop by ``take``,
answered by ``settle``, and held to the same bridge caps as a JavaScript cell's.

Each request the guest makes is a Monty future keyed by Monty's call id; its arguments are encoded
once, here, and travel as text (``request_args`` hands each over once).  Replies are kept in the shape
Monty resumes a future with (``{"return_value": ...}`` or ``{"exception": ...}``); the engine, the one
module that imports Monty, hands them over.
"""

from __future__ import annotations

from collections.abc import Callable

from bridge.jsoncodec import dumps_text, loads
from bridge.messages import GuestCaps

from .values import to_json_value

#: How a request's reply becomes the guest's value (e.g. search results as catalog handles).
Shape = Callable[[object], object]


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
        #: ``Name: message`` of each host failure raised in the guest -> its code: an uncaught exception
        #: with one of these heads is the host's rejection reaching the end of the cell (phase bridge, as a
        #: JavaScript cell's); Monty's exceptions carry no identity to tell it by.
        self.failures: dict[str, str] = {}

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
            error = loads(payload or "{}")
            exception = host_error(error)
            code = error.get("code") if isinstance(error, dict) else None
            self.failures[f"{type(exception).__name__}: {exception}"] = code if isinstance(code, str) else ""
            self._replies[call_id] = {"exception": exception}

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

    Monty's exceptions are the built-in types, which carry no attributes: the code travels in the text.
    """
    fields = err if isinstance(err, dict) else {}
    message = fields.get("message")
    message = message if isinstance(message, str) else "host request failed"
    name = fields.get("name")
    code = fields.get("code")
    kinds: dict[object, type[Exception]] = {"TypeError": TypeError, "RangeError": ValueError}
    kind = kinds.get(name, RuntimeError)
    return kind(f"{message} (code: {code})" if isinstance(code, str) and code else message)
