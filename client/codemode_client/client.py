"""The blocking client: ``Client(base_url, api_key=None)``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from . import transport
from .errors import CodemodeError
from .events import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_RECONNECTS, Resume, iter_events
from .models import CellEvent, Envelope, PendingCall
from .tools import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_LEGS,
    ClientTools,
    RunState,
    approval,
    missing_handler,
    no_approver,
    split_pending,
    tool_result,
    tool_set,
)
from .wire import allowance, cell_path, exec_body, file_path, wait_body

#: How ``run()`` pauses (a name of ours, so a test can watch the pauses without sleeping through them).
_sleep = time.sleep

#: Longer than the service's largest ``timeout_ms`` (60 s), so a long wait is not cut off by the client.
DEFAULT_TIMEOUT_S = 90.0

Approver = Callable[[PendingCall], Any]


class EventStream:
    """The events of one cell, ending with its ``EnvelopeEvent``; close it (or use ``with``) to stop early."""

    def __init__(self, events: Iterator[CellEvent], resume: Resume) -> None:
        self._events = events
        self._resume = resume

    @property
    def last_event_id(self) -> str | None:
        """The id to resume after (``events(cell_id, last_event_id=...)``) if this stream is abandoned."""
        return self._resume.last_event_id

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> CellEvent:
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """Blocking client of a codemode service: ``exec``/``wait`` and friends, and ``run()`` for the whole loop.

    ``timeout`` (seconds) bounds each request; exec and wait get longer when their ``timeout_ms``
    asks for it.  ``http_client`` (an ``httpx.Client``) replaces the client's own, e.g. for a proxy or
    a test app; it is then not closed by ``close()``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        http_client: Any = None,
        events_idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT_S,
        max_reconnects: int = DEFAULT_MAX_RECONNECTS,
    ) -> None:
        self.timeout = timeout
        self.events_idle_timeout = events_idle_timeout
        self.max_reconnects = max_reconnects
        self._http = transport.SyncHttp(base_url, api_key, timeout, http_client)

    # ---- cells -------------------------------------------------------------------------------------

    def exec(self, code: str, **fields: Any) -> Envelope:
        """Start a cell (``POST /v1/exec``); fields as the API's (``timeout_ms``, ``client_tools``, ...)."""
        body = exec_body(code, **fields)
        return Envelope.parse(
            self._http.request("POST", "/v1/exec", body=body, timeout=allowance(self.timeout, body.get("timeout_ms")))
        )

    def wait(
        self,
        cell_id: str,
        *,
        timeout_ms: int | None = None,
        tool_results: Sequence[Mapping[str, Any]] | None = None,
        approvals: Sequence[Mapping[str, Any]] | None = None,
        session_id: str | None = None,
    ) -> Envelope:
        """Resume a cell until its next stop, answering client tool calls and approvals."""
        body = wait_body(timeout_ms=timeout_ms, tool_results=tool_results, approvals=approvals, session_id=session_id)
        return Envelope.parse(
            self._http.request(
                "POST", cell_path(cell_id, "wait"), body=body, timeout=allowance(self.timeout, timeout_ms)
            )
        )

    def cancel(self, cell_id: str) -> Envelope:
        """Abort a cell; its final envelope (``failed``, code ``aborted``)."""
        return Envelope.parse(self._http.request("POST", cell_path(cell_id, "cancel")))

    def status(self, cell_id: str) -> Envelope:
        """A cell's status without resuming it."""
        return Envelope.parse(self._http.request("GET", cell_path(cell_id)))

    def events(self, cell_id: str, last_event_id: str | int | None = None) -> EventStream:
        """The cell's events as they happen (status, output, pending), ending with its envelope."""
        resume = Resume(cell_id, None if last_event_id is None else str(last_event_id), self.max_reconnects)
        return EventStream(iter_events(self._http, resume, self.events_idle_timeout), resume)

    # ---- tools -------------------------------------------------------------------------------------

    def catalog(self, session_id: str | None = None) -> dict[str, Any]:
        """``{tools: [handle metadata], quick_index: str}`` for this key."""
        params = {"session_id": session_id} if session_id is not None else None
        return self._http.request("GET", "/v1/catalog", params=params)  # type: ignore[no-any-return]

    def api_files(self, prefix: str | None = None) -> dict[str, Any]:
        """``{files: [{path, description?, bytes?}]}``: what ``API.list(prefix)`` returns in a guest."""
        params = {"prefix": prefix} if prefix is not None else None
        return self._http.request("GET", "/v1/api/files", params=params)  # type: ignore[no-any-return]

    def api_file(self, path: str) -> dict[str, Any]:
        """``{path, description?, content, bytes}``: what ``API.read(path)`` returns in a guest."""
        return self._http.request("GET", "/v1/api/files/" + file_path(path))  # type: ignore[no-any-return]

    def tool_description(self, language: str | None = None) -> dict[str, Any]:
        """``{name, description, input_schema}``: codemode as one function tool for a model, for this key."""
        params = {"language": language} if language is not None else None
        return self._http.request("GET", "/v1/tool-description", params=params)  # type: ignore[no-any-return]

    # ---- the whole loop ------------------------------------------------------------------------------

    def run(
        self,
        code: str,
        *,
        client_tools: ClientTools | None = None,
        approve: Approver | None = None,
        max_legs: int = DEFAULT_MAX_LEGS,
        deadline: float | None = DEFAULT_DEADLINE_S,
        on_envelope: Callable[[Envelope], object] | None = None,
        **fields: Any,
    ) -> Envelope:
        """Run a cell to its end: call client tools, ask ``approve`` about approvals, wait through yields.

        A handler's exception goes back to the guest as a failed tool call; ``approve(call)`` returns
        ``bool`` or ``(bool, reason)`` (without it every approval is denied, saying why).  Returns the
        final envelope, its ``output`` holding the output of every leg in order.

        The run is bounded: at most ``max_legs`` legs (the exec, then each wait) and ``deadline``
        seconds from now (``None``: no deadline; checked before each wait, so a wait already sent may
        end past it).  A cell still not finished is then cancelled and ``RunLimitError`` raised.  A
        stop that only yielded is resumed after a pause, 50 ms doubling up to 2 s, so a cell that
        yields in a loop is not resumed as fast as the network allows.  ``on_envelope(env)``, when given,
        sees each leg's envelope as it arrives (the cell id with the first; each leg's telemetry).
        """
        tools = tool_set(client_tools)
        state = RunState(max_legs, deadline, on_envelope=on_envelope)
        env = state.seen(self.exec(code, client_tools=tools.declarations, **fields))
        session_id, timeout_ms = fields.get("session_id"), fields.get("timeout_ms")
        while not env.is_final:
            calls, approvals = split_pending(env)
            results = [self._call(tools.handler(call), call) for call in calls]
            answers = [approval(a, approve(a)) if approve is not None else no_approver(a) for a in approvals]
            pause = state.pause(env, answered=bool(calls or approvals))
            if pause:
                _sleep(pause)
            over = state.over(env)
            if over is not None:
                with contextlib.suppress(CodemodeError):  # it may have ended meanwhile, or the service be gone
                    self.cancel(env.cell_id)
                raise over
            env = state.seen(
                self.wait(
                    env.cell_id, timeout_ms=timeout_ms, tool_results=results, approvals=answers, session_id=session_id
                )
            )
        return state.final(env)

    @staticmethod
    def _call(handler: Callable[..., Any] | None, call: PendingCall) -> dict[str, Any]:
        if handler is None:
            return missing_handler(call)
        try:
            value = handler(call.input)
        except Exception as exc:  # noqa: BLE001 - the guest gets it as its call's rejection
            return tool_result(call, error=exc)
        return tool_result(call, value=value)

    # ---- lifetime ------------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
