"""``/v1/sessions/{id}``: a session's runs (failure counters, saved results) and its committed store."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from service.api.schemas import ERROR_RESPONSES, SESSION_PATTERN, RunEnded, RunReport, SessionDeleted, StoreKeys
from service.capabilities.session_store import NETWORK_MARK_KEY
from service.errors import NotFound
from service.stores import ResultsBackend, SessionStore
from service.stores.saved_results import ResultScope
from service.tools.run_book import RunBook
from service.tools.run_budget import FailureLimits, run_report

from .request_gate import CallerDep
from .responses import JSONBytes
from .route_group import RouteGroup, example, route

SessionId = Annotated[str, Path(pattern=SESSION_PATTERN)]
RunId = Annotated[str, Path(pattern=SESSION_PATTERN)]

END_RUN_EXAMPLE = {"session_id": "s1", "run_id": "turn-7", "expired_results": 2}
RUN_EXAMPLE = {
    "session_id": "s1",
    "run_id": "turn-7",
    "failures": {"fetch_page": 4, "quote_shipping": 1},
    "total_failures": 5,
    "blocked": [{"tool": "fetch_page", "reason": "it failed 4 times in this run (limit 4 per tool per run)"}],
    "budget_exhausted": False,
    "limits": {"tool_failures_per_run": 4, "failures_per_run": 8},
    "saved_results": {"count": 1, "bytes": 2048},
}
STORE_KEYS_EXAMPLE = {"session_id": "s1", "keys": [{"key": "cursor", "bytes": 12}], "total_bytes": 12}
SESSION_DELETED_EXAMPLE = {"session_id": "s1", "deleted": True}


class SessionRoutes(RouteGroup):
    """A tenant's sessions: run counters and saved results, and the committed session store."""

    def __init__(
        self, results: ResultsBackend, runs: RunBook, failure_limits: FailureLimits, store: SessionStore | None
    ) -> None:
        self.results = results
        self.runs = runs
        self.failure_limits = failure_limits
        self.store = store

    @route(
        "DELETE",
        "/v1/sessions/{session_id}/runs/{run_id}",
        response_model=RunEnded,
        responses={**ERROR_RESPONSES, 200: example(END_RUN_EXAMPLE)},
        tags=("sessions",),
        summary="End a run",
        operation_id="end_run",
    )
    async def end_run(self, session_id: SessionId, run_id: RunId, key: CallerDep) -> JSONBytes:
        """End a run: its saved results expire now and its tool-failure counters are forgotten."""
        # A store that fails here is a 503 (error_responses.on_store_error), like every store failure.
        dropped = await self.results.end_run(ResultScope(key.tenant, session_id, run_id))
        await self.runs.delete_run_failures(key.tenant, session_id, run_id)
        return JSONBytes({"session_id": session_id, "run_id": run_id, "expired_results": dropped})

    @route(
        "GET",
        "/v1/sessions/{session_id}/runs/{run_id}",
        response_model=RunReport,
        responses={**ERROR_RESPONSES, 200: example(RUN_EXAMPLE)},
        tags=("sessions",),
        summary="Run counters",
        operation_id="get_run",
    )
    async def run_status(self, session_id: SessionId, run_id: RunId, key: CallerDep) -> JSONBytes:
        """The run's tool-failure counters (per tool, total, blocked tools and why) and its saved results.

        A run nobody used answers zeros: runs are named by the caller and not registered anywhere.
        """
        state = await self.runs.run_failures(key.tenant, session_id, run_id)
        count, size = await self.results.usage(ResultScope(key.tenant, session_id, run_id))
        return JSONBytes(
            {
                "session_id": session_id,
                "run_id": run_id,
                **run_report(state, self.failure_limits),
                "saved_results": {"count": count, "bytes": size},
            }
        )

    @route(
        "GET",
        "/v1/sessions/{session_id}/store",
        response_model=StoreKeys,
        responses={**ERROR_RESPONSES, 200: example(STORE_KEYS_EXAMPLE)},
        tags=("sessions",),
        summary="Session store keys",
        operation_id="get_session_store",
    )
    async def session_store(self, session_id: SessionId, key: CallerDep) -> JSONBytes:
        """Keys of the session's committed store and their byte sizes."""
        sizes = await self._store().sizes(key.tenant, session_id)
        sizes.pop(NETWORK_MARK_KEY, None)  # internal provenance mark, not a guest key
        return JSONBytes(
            {
                "session_id": session_id,
                "keys": [{"key": k, "bytes": v} for k, v in sorted(sizes.items())],
                "total_bytes": sum(sizes.values()),
            }
        )

    @route(
        "DELETE",
        "/v1/sessions/{session_id}",
        response_model=SessionDeleted,
        responses={**ERROR_RESPONSES, 200: example(SESSION_DELETED_EXAMPLE)},
        tags=("sessions",),
        summary="Delete a session",
        operation_id="delete_session",
    )
    async def delete_session(self, session_id: SessionId, key: CallerDep) -> JSONBytes:
        """Delete the session's committed store (running cells keep their own buffered writes)."""
        existed = await self._store().delete_session(key.tenant, session_id)
        if not existed:
            raise NotFound(f"session {session_id!r} has no stored data")
        return JSONBytes({"session_id": session_id, "deleted": True})

    def _store(self) -> SessionStore:
        """The session store (404 on a server without one; while it is down its calls answer 503)."""
        if self.store is None:
            raise NotFound("this server runs without a session store")
        return self.store
