"""The asyncio client: ``AsyncClient(base_url, api_key=None)``, the same API as ``Client`` with ``await``."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from . import transport
from .client import DEFAULT_TIMEOUT_S, Approver
from .errors import CodemodeError
from .events import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_RECONNECTS, Resume, aiter_events
from .models import CellEvent, Envelope, PendingCall
from .tools import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_LEGS,
    ClientTools,
    RunState,
    ToolSet,
    approval,
    missing_handler,
    no_approver,
    split_pending,
    tool_result,
    tool_set,
)
from .wire import allowance, cell_path, exec_body, file_path, wait_body


class AsyncEventStream:
    """The events of one cell, ending with its ``EnvelopeEvent``; ``aclose()`` it (or ``async with``) to stop early."""

    def __init__(self, events: AsyncIterator[CellEvent], resume: Resume) -> None:
        self._events = events
        self._resume = resume

    @property
    def last_event_id(self) -> str | None:
        return self._resume.last_event_id

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> CellEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


#: How ``run()`` pauses (a name of ours, so a test can watch the pauses without sleeping through them).
_sleep = asyncio.sleep


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class AsyncClient:
    """``Client`` for asyncio: every method is a coroutine, ``events`` an async iterator.

    Handlers and the approver may be plain or async functions; plain ones run on the event loop
    (hand blocking work to a thread yourself).  ``http_client`` takes an ``httpx.AsyncClient``.
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
        self._http = transport.AsyncHttp(base_url, api_key, timeout, http_client)

    async def exec(self, code: str, **fields: Any) -> Envelope:
        body = exec_body(code, **fields)
        return Envelope.parse(
            await self._http.request(
                "POST", "/v1/exec", body=body, timeout=allowance(self.timeout, body.get("timeout_ms"))
            )
        )

    async def wait(
        self,
        cell_id: str,
        *,
        timeout_ms: int | None = None,
        tool_results: Sequence[Mapping[str, Any]] | None = None,
        approvals: Sequence[Mapping[str, Any]] | None = None,
        session_id: str | None = None,
    ) -> Envelope:
        body = wait_body(timeout_ms=timeout_ms, tool_results=tool_results, approvals=approvals, session_id=session_id)
        return Envelope.parse(
            await self._http.request(
                "POST", cell_path(cell_id, "wait"), body=body, timeout=allowance(self.timeout, timeout_ms)
            )
        )

    async def cancel(self, cell_id: str) -> Envelope:
        return Envelope.parse(await self._http.request("POST", cell_path(cell_id, "cancel")))

    async def status(self, cell_id: str) -> Envelope:
        return Envelope.parse(await self._http.request("GET", cell_path(cell_id)))

    def events(self, cell_id: str, last_event_id: str | int | None = None) -> AsyncEventStream:
        resume = Resume(cell_id, None if last_event_id is None else str(last_event_id), self.max_reconnects)
        return AsyncEventStream(aiter_events(self._http, resume, self.events_idle_timeout), resume)

    async def catalog(self, session_id: str | None = None) -> dict[str, Any]:
        params = {"session_id": session_id} if session_id is not None else None
        return await self._http.request("GET", "/v1/catalog", params=params)  # type: ignore[no-any-return]

    async def api_files(self, prefix: str | None = None) -> dict[str, Any]:
        params = {"prefix": prefix} if prefix is not None else None
        return await self._http.request("GET", "/v1/api/files", params=params)  # type: ignore[no-any-return]

    async def api_file(self, path: str) -> dict[str, Any]:
        return await self._http.request("GET", "/v1/api/files/" + file_path(path))  # type: ignore[no-any-return]

    async def tool_description(self, language: str | None = None) -> dict[str, Any]:
        params = {"language": language} if language is not None else None
        return await self._http.request("GET", "/v1/tool-description", params=params)  # type: ignore[no-any-return]

    async def run(
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
        """``Client.run`` for asyncio (bounded alike); the client tool calls of one stop run concurrently.

        A run cancelled after its cell started (``asyncio.wait_for``, a task's ``cancel()``) cancels that
        cell on the service before the ``CancelledError`` goes on, so it does not stay parked for nobody.
        """
        tools = tool_set(client_tools)
        state = RunState(max_legs, deadline, on_envelope=on_envelope)
        env = state.seen(await self.exec(code, client_tools=tools.declarations, **fields))
        try:
            return await self._resume(env, tools, state, approve, fields)
        except asyncio.CancelledError:
            with contextlib.suppress(CodemodeError):  # it may have ended meanwhile, or the service be gone
                await self.cancel(env.cell_id)
            raise

    async def _resume(
        self, env: Envelope, tools: ToolSet, state: RunState, approve: Approver | None, fields: Mapping[str, Any]
    ) -> Envelope:
        session_id, timeout_ms = fields.get("session_id"), fields.get("timeout_ms")
        while not env.is_final:
            calls, approvals = split_pending(env)
            results = list(await asyncio.gather(*(self._call(tools.handler(c), c) for c in calls)))
            answers = [
                approval(a, await _maybe_await(approve(a))) if approve is not None else no_approver(a)
                for a in approvals
            ]
            pause = state.pause(env, answered=bool(calls or approvals))
            if pause:
                await _sleep(pause)
            over = state.over(env)
            if over is not None:
                with contextlib.suppress(CodemodeError):  # it may have ended meanwhile, or the service be gone
                    await self.cancel(env.cell_id)
                raise over
            env = state.seen(
                await self.wait(
                    env.cell_id, timeout_ms=timeout_ms, tool_results=results, approvals=answers, session_id=session_id
                )
            )
        return state.final(env)

    @staticmethod
    async def _call(handler: Callable[..., Any] | None, call: PendingCall) -> dict[str, Any]:
        if handler is None:
            return missing_handler(call)
        try:
            value = await _maybe_await(handler(call.input))
        except Exception as exc:  # noqa: BLE001 - the guest gets it as its call's rejection
            return tool_result(call, error=exc)
        return tool_result(call, value=value)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
