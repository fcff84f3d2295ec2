"""What one cell may reach, made before it runs: its catalog view, tool-call session and MCP scope.

``prepare_cell(access, steps)`` is the registry's preparation step: it builds the cell's ``CellTools``
(visible tools under the tenant's and the request's policy, the MCP servers its tenant sees, its
run's failure budget) and the guest config the prelude turns into globals; the handler modules read
that state back with ``cell_tools``.  It runs before the cell takes a worker and a running slot,
within the cell's timeout: whatever may wait (MCP connects, store reads) waits without holding
capacity other cells need.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.api_files.table import ApiFileTable
from service.mcp.results import ResultChecker
from service.mcp.scope import McpScope, listed_servers, tenant_scope
from service.runtime.dispatch import CellContext, HostCall
from service.stores.cell_writes import CellStoreWrites
from service.tools.access import ToolAccess
from service.tools.catalog import CatalogView
from service.tools.plugin import ToolContext
from service.tools.run_budget import RunLedger
from service.tools.session import CallSession

if TYPE_CHECKING:
    from service.mcp.hub import McpHub
    from service.mcp.views import McpServerView

#: More per-cell preparation (e.g. reading the session's data), given the cell and its deadline
#: (event-loop time); it runs once the cell's ``CellTools`` exist, beside the run-counter read,
#: and must not raise past the deadline.  It answers what to wait for, or None when it has nothing to do.
StartStep = Callable[[CellContext, float], Awaitable[None] | None]


@dataclass
class CellTools:
    """Per-cell state of the handlers (the cell context's ``tools``)."""

    view: CatalogView
    session: CallSession
    mcp_servers: list[McpServerView]
    context: ToolContext  # what every call of the cell shares (``tool_context`` adds the call's id)
    mcp: McpScope | None = None  # the tenant's connections under its tool policy
    api: ApiFileTable | None = None
    writes: CellStoreWrites | None = None
    session_network: bool = False  # the committed session data includes network-derived writes
    store_error: str | None = None  # the session's data could not be read before the cell started


def cell_tools(cell: CellContext) -> CellTools:
    """The state ``prepare_cell`` made for this cell."""
    assert isinstance(cell.tools, CellTools), "handlers run only for prepared cells"
    return cell.tools


def tool_context(state: CellTools, call: HostCall) -> ToolContext:
    """The context a tool (and its hooks) see for ``call``, a request of the cell ``state`` belongs to."""
    return state.context.for_call(f"req_{call.request_id}")


def cell_context(cell: CellContext) -> ToolContext:
    """What every tool call of ``cell`` shares (its ``call_id`` is left empty)."""
    spec = cell.spec
    return ToolContext(tenant=spec.tenant, session_id=spec.session_id, run_id=spec.run_id, cell_id=cell.id, call_id="")


def sync_counters(call: HostCall) -> None:
    """Copy the cell's call, search and describe counts into its telemetry."""
    state = cell_tools(call.cell)
    t = call.cell.telemetry
    t.call_count = state.session.call_count  # native, client and MCP calls
    t.search_count = state.session.search_count
    t.describe_count = state.session.describe_count
    t.retries = state.session.native.retries


async def prepare_cell(access: ToolAccess, hub: McpHub | None, steps: Sequence[StartStep], cell: CellContext) -> None:
    """Make the cell's handler state (the registry's preparation step, with ``access``, ``hub`` and
    ``steps`` bound): ``access`` gives the cell's tools, ``hub`` its tenant's MCP servers, ``steps`` run
    beside the run-counter read.  What waits here waits within the cell's timeout."""
    spec = cell.spec
    deadline = asyncio.get_running_loop().time() + spec.limits.timeout_ms / 1000
    view = access.view_for(spec.tool_policy, spec.client_tools)
    # The cell's MCP results are checked in a helper of its own principal (``service.mcp.results``).
    results = ResultChecker(access.helpers, access.catalog.limits.schemas, spec.tenant, spec.principal)
    mcp = tenant_scope(hub, spec.tenant, access.tool_policy, spec.tool_policy, results)
    # A server that is slow to connect may take at most the cell's own time budget.
    servers = await listed_servers(mcp, spec.limits.timeout_ms / 1000) if mcp is not None else []
    down = mcp.unavailable() if mcp is not None else []
    shown = [n for s in servers for n in (s.identifier, s.name)] + [n for pair in down for n in pair]
    approvals = access.approvals_for(spec.tool_policy, spec.require_approval, view, shown)
    ledger = access.ledger(spec.tenant, spec.session_id, spec.run_id)
    session = CallSession(
        view,
        max_calls=access.settings.max_calls_per_cell,
        max_searches=access.settings.max_searches_per_cell,
        ledger=ledger,
        breaker=access.breaker,
        approvals=approvals,
    )
    cell.tools = CellTools(view=view, session=session, mcp_servers=servers, context=cell_context(cell), mcp=mcp)
    # The store reads wait side by side: a store that does not answer costs the cell its timeout once.
    # Most cells have none to wait for (counters read less than a second ago, code that names no
    # store): then no task is made for them.
    waits: list[Awaitable[None]] = (
        [] if access.run_counters.fresh(ledger.state) else [_refresh(access, ledger, deadline)]
    )
    waits += [wait for step in steps if (wait := step(cell, deadline)) is not None]
    if len(waits) == 1:
        await waits[0]
    elif waits:
        await asyncio.gather(*waits)
    blocked = ledger.blocked()
    cell.guest_config = {
        # Tools blocked for the run when the cell starts say so on their handles (catalog.all()).
        "tools": [{**h, "blocked": True} if h.get("callableName") in blocked else h for h in view.handles()],
        "mcp": [
            {"identifier": s.identifier, "serverName": s.name, "tools": [t.identifier for t in s.tools]}
            for s in servers
        ],
        "mcpUnavailable": [{"identifier": ident, "serverName": name} for ident, name in down],
    }


async def _refresh(access: ToolAccess, ledger: RunLedger, deadline: float) -> None:
    """Re-read the run's counters; a store that does not answer in time leaves them as last seen."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout_at(deadline):
            await access.run_counters.refresh(ledger)
