"""The tools a tenant's cells see: the catalog under the base and key policies, approvals and run
counters.  (A tenant's MCP servers are its ``service.mcp.scope.tenant_scope``: this floor does not
know the MCP package; it is told the configured servers' names, to check approval entries.)

``ToolAccess`` is made once per service (``service.assembly``); HTTP routes read its catalog views
and run counters, and each cell's preparation (``service.capabilities.cell_tools.prepare_cell``) asks it
for the cell's view, approval rules, ledger and MCP scope.  It knows nothing of cells beyond the
fields of their spec that it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from service.errors import ConfigError, InvalidRequest
from service.helpers.pool import HelperPool
from service.principals import helper_principal
from service.settings import ApiKey, Settings

from .approvals import KEY, REQUEST, SERVER, ApprovalRules, unknown_entry
from .catalog import CatalogView, ToolCatalog, ToolEntry, checked_client_tools, client_entries
from .errors import ToolError
from .policy import PolicySubject, ToolPolicy, parse_entries
from .run_book import DEFAULT_RUN, RunBook, RunCounters
from .run_budget import Breaker, FailureLimits, RunLedger
from .schema_checks import SchemaChecker, vetted_contract


class ToolAccess:
    """The tools a tenant's cells see: the catalog under the base and key policies."""

    def __init__(
        self,
        settings: Settings,
        catalog: ToolCatalog,
        mcp_names: Sequence[str] = (),
        tool_policy: ToolPolicy | None = None,
        run_counters: RunCounters | None = None,
        *,
        helpers: HelperPool,
    ) -> None:
        """``mcp_names``: the configured MCP servers' identifiers and names (approval entries may name
        them); ``helpers``: the helper processes that check client tool schemas."""
        self.settings = settings
        self.catalog = catalog
        self.mcp_names = tuple(mcp_names)
        self.tool_policy = tool_policy  # the base `[tools]` policy; MCP entries apply to the hub's servers
        self.failure_limits = FailureLimits(settings.tool_failures_per_run, settings.failures_per_run)
        # Runs' failure counters as this process knows them, written to the session store (if any).
        self.run_counters = RunBook(run_counters, self.failure_limits, ttl_seconds=settings.session_ttl_seconds)
        self.breaker = Breaker()
        self.helpers = helpers  # also check cells' MCP results (``service.mcp.results``)
        self.approvals = ApprovalRules().adding(SERVER, self._configured_approvals())
        self.schema_checker = SchemaChecker(catalog.limits.schemas, helpers)

    def _configured_approvals(self) -> tuple[str, ...]:
        """`[tools] approve`, after checking it and every key's `tools.approve` (ConfigError naming the entry)."""
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
            problem = unknown_entry(entries, where, self.catalog.subjects, self.mcp_names)
            if problem is not None:
                raise ConfigError(problem, need_param=where)
            checked.append(entries)
        return checked[0]

    def approvals_for(
        self, policy: ToolPolicy | None, requested: Sequence[str], view: CatalogView, servers: list[str]
    ) -> ApprovalRules:
        """A cell's approval rules: the server's, its key's (``policy``) and its exec's (``requested``;
        422 for a bad entry)."""
        rules = self.approvals.adding(KEY, policy.approve if policy is not None else ())
        if not requested:
            return rules
        try:
            entries = parse_entries(list(requested), "require_approval")
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param="require_approval") from None
        subjects = [PolicySubject(e.tool_name, e.tool_id, e.plugin_id, e.source) for e in view.entries()]
        problem = unknown_entry(entries, "require_approval", subjects, servers)
        if problem is not None:
            raise InvalidRequest(problem, need_param="require_approval")
        return rules.adding(REQUEST, entries)

    def ledger(self, tenant: str, session_id: str | None, run_id: str | None) -> RunLedger:
        """The failure budget of a cell's run; a cell without a session is a run of its own."""
        if session_id is None:
            return self.run_counters.own_ledger()
        return self.run_counters.ledger(tenant, session_id, run_id or DEFAULT_RUN)

    def view_for(self, policy: ToolPolicy | None, client_tools: Sequence[ToolEntry] = ()) -> CatalogView:
        try:
            return self.catalog.view(tenant_policy=policy, client_tools=client_tools)
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param=getattr(exc, "field", "client_tools")) from None

    async def client_tools(self, declared: Sequence[Mapping[str, object]], key: ApiKey) -> tuple[ToolEntry, ...]:
        """An exec request's client tools, checked and compiled once per principal (422 naming the field).

        Checking a schema costs ~0.3 ms per subschema of pure Python (the GIL: a thread would not
        free the event loop), so schemas not vetted before are checked in a helper process of
        ``key``'s principal; the loop only measures them (one native encode each).
        """
        if not declared:
            return ()
        principal = helper_principal(self.settings.worker_isolation, key)
        try:
            checked = checked_client_tools(declared, self.catalog.limits.schemas)
            fresh = [encoded for _, encoded in checked if vetted_contract(encoded, principal) is None]
            problems = await self.schema_checker.problems(fresh, key) if fresh else {}
            return client_entries(checked, problems, principal)
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param=getattr(exc, "field", "client_tools")) from None

    async def close(self) -> None:
        """Write the runs' failures still unwritten (before the store closes)."""
        await self.run_counters.close()
