"""``/v1/exec`` and ``/v1/cells/{id}``: start, resume, cancel and look at cells."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Request

from service.api.exec import cell_spec, wait_answers
from service.api.keyed_tools import KeyedTools
from service.api.parked import take_up_parked
from service.api.schemas import ERROR_RESPONSES, ID_PATTERN, CellEnvelope, ExecRequest, WaitRequest
from service.runtime.registry import CellRegistry
from service.tracing import Tracing

from .request_gate import api_key_of
from .responses import JSONBytes
from .route_group import RouteGroup, route

# Ids in paths are checked exactly like ids in bodies (same pattern, whole string).
CellId = Annotated[str, Path(pattern=ID_PATTERN, description="cell id from an envelope")]


class CellRoutes(RouteGroup):
    """The cell life cycle over HTTP: each route asks the registry, as the caller's tenant."""

    def __init__(self, cells: CellRegistry, tools: KeyedTools, tracing: Tracing) -> None:
        self.cells = cells
        self.tools = tools
        self.tracing = tracing

    @route(
        "POST",
        "/v1/exec",
        response_model=CellEnvelope,
        responses=ERROR_RESPONSES,
        tags=("cells",),
        summary="Run a cell",
        operation_id="exec_cell",
    )
    async def exec_cell(self, body: ExecRequest, request: Request) -> JSONBytes:
        """Start a cell and run it until it completes, fails, or parks (``waiting``); with ``background``,
        answer ``running`` at once while the cell runs on its own."""
        spec = await cell_spec(self.cells, self.tools, api_key_of(request), body)
        return JSONBytes(await self.cells.exec(spec, self.tracing.parent_from_scope(request.scope)))

    @route(
        "POST",
        "/v1/cells/{cell_id}/wait",
        response_model=CellEnvelope,
        responses=ERROR_RESPONSES,
        tags=("cells",),
        summary="Resume a waiting cell",
        operation_id="wait_cell",
    )
    async def wait_cell(self, cell_id: CellId, request: Request, body: WaitRequest | None = None) -> JSONBytes:
        """Resume a parked cell (optionally with client tool results and approval answers) until its next stop."""
        key = api_key_of(request)
        body = body or WaitRequest()
        results, approvals = wait_answers(body)
        ended = await take_up_parked(self.cells, self.tools, key, cell_id)  # its replica stopped: here now
        if ended is not None:
            return JSONBytes(ended)
        return JSONBytes(
            await self.cells.wait(
                cell_id,
                key.tenant,
                timeout_ms=body.timeout_ms,
                tool_results=results,
                session_id=body.session_id,
                approvals=approvals,
                trace_parent=self.tracing.parent_from_scope(request.scope),
            )
        )

    @route(
        "POST",
        "/v1/cells/{cell_id}/cancel",
        response_model=CellEnvelope,
        responses=ERROR_RESPONSES,
        tags=("cells",),
        summary="Cancel a cell",
        operation_id="cancel_cell",
    )
    async def cancel_cell(self, cell_id: CellId, request: Request) -> JSONBytes:
        """Abort a cell; answers its final envelope (``failed``, code ``aborted``)."""
        tenant = api_key_of(request).tenant
        return JSONBytes(await self.cells.cancel(cell_id, tenant, self.tracing.parent_from_scope(request.scope)))

    @route(
        "GET",
        "/v1/cells/{cell_id}",
        response_model=CellEnvelope,
        responses=ERROR_RESPONSES,
        tags=("cells",),
        summary="Cell status",
        operation_id="get_cell",
    )
    async def cell_status(self, cell_id: CellId, request: Request) -> JSONBytes:
        """Status of a cell without resuming it (finished cells: a summary without value or output)."""
        return JSONBytes(self.cells.status(cell_id, api_key_of(request).tenant))
