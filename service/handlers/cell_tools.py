"""What one cell may reach, made before it runs: its catalog view, tool-call session and MCP scope.

``ToolAccess.prepare(cell)`` builds the cell's ``CellTools`` (visible tools under the tenant's and
the request's policy, the MCP servers its tenant sees, its run's failure budget) and the guest
config the prelude turns into globals; the handler modules read that state back with ``cell_tools``.
It runs before the cell takes a worker and a running slot, within the cell's timeout: whatever may
wait (MCP connects, store reads) waits without holding capacity other cells need.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.api_files.table import ApiFileTable
from service.cells.dispatch import CellContext, HostCall
from service.errors import ConfigError, InvalidRequest
from service.settings import Settings
from service.stores.cell_writes import CellStoreWrites
from service.tools.catalog import CatalogView, ToolCatalog, checked_client_tools, client_entries
from service.tools.approvals import KEY, REQUEST, SERVER, ApprovalRules, unknown_entry
from service.tools.errors import ToolError
from service.tools.plugin import ToolContext
from service.tools.policy import McpVisibility, PolicySubject, ToolPolicy, parse_entries
from service.handlers.saved_results import DEFAULT_RUN  # a session without a run_id: the same run
from service.workers.sandbox import sandbox_options
from service.tools.run_book import RunBook, RunCounters
from service.tools.run_budget import Breaker, FailureLimits, RunLedger
from service.tools.schema_checks import SchemaChecker, vetted_contract
from service.tools.session import CallSession

#: Host requests one synchronous burst of guest code may queue; more are refused in the guest.
MAX_QUEUED_REQUESTS = 1024
#: More per-cell preparation (e.g. reading the session's data), given the cell and its deadline
#: (event-loop time); it runs once the cell's ``CellTools`` exist, beside the run-counter read,
#: and must not raise past the deadline.
StartStep = Callable[[CellContext, float], Awaitable[None]]


@dataclass
class CellTools:
    """Per-cell state of the handlers (the cell context's ``tools``)."""

    view: CatalogView
    session: CallSession
    mcp_servers: list[Any]
    mcp: Any = None  # service.mcp.scope.McpScope: the tenant's connections under its tool policy
    api: ApiFileTable | None = None
    writes: CellStoreWrites | None = None
    session_network: bool = False  # the committed session data includes network-derived writes
    store_error: str | None = None  # the session's data could not be read before the cell started


def cell_tools(cell: CellContext) -> CellTools:
    """The state ``ToolAccess.prepare`` made for this cell."""
    assert isinstance(cell.tools, CellTools), "handlers run only for prepared cells"
    return cell.tools


def tool_context(call: HostCall) -> ToolContext:
    spec = call.cell.spec
    return ToolContext(
        tenant=spec.tenant,
        session_id=spec.session_id,
        run_id=spec.run_id,
        cell_id=call.cell.id,
        call_id=f"req_{call.request_id}",
    )


def sync_counters(call: HostCall) -> None:
    """Copy the cell's call, search and describe counts into its telemetry."""
    state = cell_tools(call.cell)
    t = call.cell.telemetry
    t.call_count = state.session.call_count  # native, client and MCP calls
    t.search_count = state.session.search_count
    t.describe_count = state.session.describe_count
    t.retries = state.session.retries


class ToolAccess:
    """The tools a tenant's cells see: the catalog under the base and key policies, and the MCP hub."""

    def __init__(
        self,
        settings: Settings,
        catalog: ToolCatalog,
        mcp: Any = None,
        tool_policy: ToolPolicy | None = None,
        run_counters: RunCounters | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.mcp = mcp
        self.tool_policy = tool_policy  # the base `[tools]` policy; MCP entries apply to the hub's servers
        self.failure_limits = FailureLimits(settings.tool_failures_per_run, settings.failures_per_run)
        # Runs' failure counters as this process knows them, written to the session store (if any).
        self.run_counters = RunBook(run_counters, self.failure_limits, ttl_seconds=settings.session_ttl_seconds)
        self.breaker = Breaker()
        self.start_steps: list[StartStep] = []
        self.approvals = ApprovalRules().adding(SERVER, self._configured_approvals())
        self.schema_checker = SchemaChecker(
            catalog.limits.schemas, sandbox_options(settings.sandbox, settings.worker_user)
        )

    def _configured_approvals(self) -> tuple[str, ...]:
        """`[tools] approve`, after checking it and every key's `tools.approve` (ConfigError naming the entry)."""
        servers = [n for pair in (self.mcp.identifiers() if self.mcp is not None else []) for n in pair]
        tables = [("tools.approve", list(self.settings.tools.approve))]
        tables += [
            (f"api_keys[{i}].tools.approve", key.tools["approve"])
            for i, key in enumerate(self.settings.api_keys)
            if isinstance(key.tools, Mapping) and "approve" in key.tools
        ]
        checked: list[tuple[str, ...]] = []
        for where, raw in tables:
            try:
                entries = parse_entries(raw, where)
            except ToolError as exc:
                raise ConfigError(str(exc), need_param=where) from None
            problem = unknown_entry(entries, where, self.catalog.subjects, servers)
            if problem is not None:
                raise ConfigError(problem, need_param=where)
            checked.append(entries)
        return checked[0]

    def approvals_for(self, cell: CellContext, view: CatalogView, servers: list[str]) -> ApprovalRules:
        """The cell's approval rules: the server's, its key's and its exec's (422 for a bad exec entry)."""
        policy = cell.spec.tool_policy
        rules = self.approvals.adding(KEY, policy.approve if isinstance(policy, ToolPolicy) else ())
        if not cell.spec.require_approval:
            return rules
        try:
            entries = parse_entries(list(cell.spec.require_approval), "require_approval")
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param="require_approval") from None
        subjects = [PolicySubject(e.tool_name, e.tool_id, e.plugin_id, e.source) for e in view.entries()]
        problem = unknown_entry(entries, "require_approval", subjects, servers)
        if problem is not None:
            raise InvalidRequest(problem, need_param="require_approval")
        return rules.adding(REQUEST, entries)

    def ledger(self, cell: CellContext) -> RunLedger:
        """The failure budget of the cell's run; a cell without a session is a run of its own."""
        spec = cell.spec
        if spec.session_id is None:
            return self.run_counters.own_ledger()
        return self.run_counters.ledger(spec.tenant, spec.session_id, spec.run_id or DEFAULT_RUN)

    def view_for(self, policy: ToolPolicy | None, client_tools: Sequence[Any] = ()) -> CatalogView:
        try:
            return self.catalog.view(tenant_policy=policy, client_tools=client_tools)
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param=getattr(exc, "field", "client_tools")) from None

    async def client_tools(self, declared: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
        """An exec request's client tools, checked and compiled once (422 naming the field).

        Checking a schema costs ~0.3 ms per subschema of pure Python (the GIL: a thread would not
        free the event loop), so schemas not vetted before are checked in the schema checker's
        helper process; the loop only measures them (one native encode each).
        """
        if not declared:
            return ()
        try:
            checked = checked_client_tools(declared, self.catalog.limits.schemas)
            fresh = [encoded for _, encoded in checked if vetted_contract(encoded) is None]
            problems = await self.schema_checker.problems(fresh) if fresh else {}
            return client_entries(checked, problems)
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param=getattr(exc, "field", "client_tools")) from None

    def start(self) -> None:
        """Start the schema checker's helper process (in the background)."""
        self.schema_checker.start()

    def mcp_scope(self, tenant: str, policy: ToolPolicy | None) -> Any:
        """The MCP hub as this tenant under the base and its key's policy sees it (None without MCP)."""
        if self.mcp is None:
            return None
        from service.mcp.scope import McpScope

        return McpScope(self.mcp, tenant, McpVisibility.of(self.tool_policy, policy))

    async def mcp_servers(self, mcp: Any, deadline_s: float) -> list[Any]:
        return await mcp.servers(deadline_s=deadline_s) if mcp is not None else []

    async def close(self) -> None:
        """Write the runs' failures still unwritten (before the store closes); stop the schema checker."""
        await self.run_counters.close()
        self.schema_checker.close()

    async def prepare(self, cell: CellContext) -> None:
        """Make the cell's handler state; what waits here waits within the cell's timeout."""
        deadline = asyncio.get_running_loop().time() + cell.spec.limits.timeout_ms / 1000
        view = self.view_for(cell.spec.tool_policy, cell.spec.client_tools)
        mcp = self.mcp_scope(cell.spec.tenant, cell.spec.tool_policy)
        # A server that is slow to connect may take at most the cell's own time budget.
        servers = await self.mcp_servers(mcp, cell.spec.limits.timeout_ms / 1000)
        down = mcp.unavailable() if mcp is not None else []
        shown = [n for s in servers for n in (s.identifier, s.name)] + [n for pair in down for n in pair]
        approvals = self.approvals_for(cell, view, shown)
        ledger = self.ledger(cell)
        session = CallSession(
            view,
            max_calls=self.settings.max_calls_per_cell,
            max_searches=self.settings.max_searches_per_cell,
            ledger=ledger,
            breaker=self.breaker,
            approvals=approvals,
        )
        cell.tools = CellTools(view=view, session=session, mcp_servers=servers, mcp=mcp)
        # The store reads wait side by side: a store that does not answer costs the cell its timeout once.
        await asyncio.gather(self._refresh(ledger, deadline), *(step(cell, deadline) for step in self.start_steps))
        blocked = ledger.blocked()
        cell.guest_config = {
            # Tools blocked for the run when the cell starts say so on their handles (catalog.all()).
            "tools": [{**h, "blocked": True} if h.get("callableName") in blocked else h for h in view.handles()],
            "mcp": [
                {"identifier": s.identifier, "serverName": s.name, "tools": [t.identifier for t in s.tools]}
                for s in servers
            ],
            "mcpUnavailable": [{"identifier": ident, "serverName": name} for ident, name in down],
            "maxRequestBytes": cell.spec.limits.max_request_bytes,
            "maxQueuedRequests": MAX_QUEUED_REQUESTS,
        }

    async def _refresh(self, ledger: RunLedger, deadline: float) -> None:
        """Re-read the run's counters; a store that does not answer in time leaves them as last seen."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                await self.run_counters.refresh(ledger)
