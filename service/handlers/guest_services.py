"""Host handlers behind the guest's tools, catalog, API files, saved results and session store.

``GuestServices.prepare(cell)`` builds one cell's view of the world before it runs (visible
tools under the tenant's and request's policy, the guest config the prelude turns into globals);
``install(dispatcher)`` routes the guest's requests to the handlers below; the end-of-cell hook
commits buffered ``store`` writes when, and only when, the cell completed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge import jsoncodec
from bridge.output import NotRetained, RetainResult
from bridge.refs import describe_reference

from service.api_files.errors import ApiFileError
from service.api_files.model import McpServerDecl, McpToolDecl, ToolDecl
from service.api_files.quick_index import IndexEntry, quick_index
from service.api_files.table import ApiFileTable
from service.cells.cell import Cell
from service.cells.dispatch import Dispatcher, GuestError, HostCall, NeedsCaller, RawJson
from service.mcp.errors import McpError
from service.stores.saved_results import ResultScope, ResultsError, ResultsStore
from service.settings import Settings
from service.stores.cell_writes import CellStoreWrites
from service.stores import SessionStore, StoreLimits
from service.stores.errors import StoreError, StoreLimitError, StoreTypeError
from service.errors import InvalidRequest
from service.tools.catalog import CatalogView, ToolCatalog, compile_client_tools
from service.tools.errors import ClientToolCall, ToolCallError, ToolError
from service.tools.plugin import ToolContext
from service.tools.policy import McpVisibility, ToolPolicy
from service.tools.search import SearchQueryError
from service.tools.session import CallSession

DEFAULT_RUN = "default"
#: Host requests one synchronous burst of guest code may queue; more are refused in the guest.
MAX_QUEUED_REQUESTS = 1024
#: Internal store key: set when a cell that saw network-derived data committed writes, so later
#: cells that load from the session are marked untrusted too.  Guest keys cannot start with NUL.
NETWORK_MARK_KEY = "\u0000codemode:network"


@dataclass
class CellTools:
    """Per-cell state of the handlers (kept in ``cell.scope['guest']``)."""

    view: CatalogView
    session: CallSession
    mcp_servers: list[Any]
    mcp: Any = None  # service.mcp.scope.McpScope: the tenant's connections under its tool policy
    api: ApiFileTable | None = None
    writes: CellStoreWrites | None = None
    session_network: bool = False  # the committed session data includes network-derived writes


class GuestServices:
    """Owns the catalog, the results store and the session store on behalf of cells."""

    def __init__(self, settings: Settings, catalog: ToolCatalog, results: ResultsStore,
                 store: SessionStore | None, mcp: Any = None, tool_policy: ToolPolicy | None = None) -> None:
        self.settings = settings
        self.catalog = catalog
        self.tool_policy = tool_policy  # the base `[tools]` policy; MCP entries apply to the hub's servers
        self.results = results
        self.store = store
        self.mcp = mcp
        self.store_limits = store_limits(settings)

    # ---- wiring ----------------------------------------------------------------------------------

    def install(self, dispatcher: Dispatcher) -> None:
        routes = {
            "tool": self._tool, "search": self._search, "describe": self._describe,
            "api.list": self._api_list, "api.read": self._api_read,
            "results.save": self._results_save, "results.load": self._results_load,
            "results.delete": self._results_delete,
            "store.get": self._store_get, "store.set": self._store_set, "store.delete": self._store_delete,
        }
        read_only = {"search", "describe", "api.list", "api.read", "results.load", "store.get"}
        for method, handler in routes.items():
            dispatcher.register(method, handler, side_effects=method not in read_only)
        dispatcher.on_finish(self._finish)

    def view_for(self, policy: ToolPolicy | None, client_tools: Sequence[Any] = ()) -> CatalogView:
        try:
            return self.catalog.view(tenant_policy=policy, client_tools=client_tools)
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param=getattr(exc, "field", "client_tools")) from None

    async def client_tools(self, declared: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
        """An exec request's client tools, checked and compiled once (422 naming the field).

        Checking a schema against its meta-schema costs ~0.5 ms per subschema, so the compile
        runs in a thread: the event loop keeps serving other tenants meanwhile.
        """
        if not declared:
            return ()
        try:
            return await asyncio.to_thread(compile_client_tools, declared, self.catalog.limits.schemas)
        except ToolError as exc:
            raise InvalidRequest(str(exc), need_param=getattr(exc, "field", "client_tools")) from None

    def mcp_scope(self, tenant: str, policy: ToolPolicy | None) -> Any:
        """The MCP hub as this tenant under the base and its key's policy sees it (None without MCP)."""
        if self.mcp is None:
            return None
        from service.mcp.scope import McpScope

        return McpScope(self.mcp, tenant, McpVisibility.of(self.tool_policy, policy))

    async def prepare(self, cell: Cell) -> None:
        view = self.view_for(cell.spec.tool_policy, cell.spec.client_tools)
        mcp = self.mcp_scope(cell.spec.tenant, cell.spec.tool_policy)
        # A server that is slow to connect may take at most the cell's own time budget.
        deadline_s = cell.spec.limits.timeout_ms / 1000
        servers = await mcp.servers(deadline_s=deadline_s) if mcp is not None else []
        down = mcp.unavailable() if mcp is not None else []
        session = CallSession(view, max_calls=self.settings.max_calls_per_cell,
                              max_searches=self.settings.max_searches_per_cell)
        state = CellTools(view=view, session=session, mcp_servers=servers, mcp=mcp)
        cell.scope["guest"] = state
        cell.scope["guest_config"] = {
            "tools": view.handles(),
            "mcp": [{"identifier": s.identifier, "serverName": s.name,
                     "tools": [t.identifier for t in s.tools]} for s in servers],
            "mcpUnavailable": [{"identifier": ident, "serverName": name} for ident, name in down],
            "maxRequestBytes": cell.spec.limits.max_request_bytes,
            "maxQueuedRequests": MAX_QUEUED_REQUESTS,
        }
        cell.scope["release_reference"] = lambda ref_id: self.results.delete(self._scope(cell), ref_id)

    def api_table(self, view: CatalogView, servers: list[Any]) -> ApiFileTable:
        tools = [ToolDecl(e.callable_name, e.description, e.input_schema, e.output_schema, e.trusted)
                 for e in view.entries()]
        mcp = [McpServerDecl(s.identifier, s.name,
                             tuple(McpToolDecl(t.identifier, t.name, t.description or "", t.input_schema)
                                   for t in s.tools),
                             s.has_resources, s.has_prompts) for s in servers]
        return ApiFileTable(tools, mcp)

    async def api_table_for(self, view: CatalogView, tenant: str, policy: ToolPolicy | None) -> ApiFileTable:
        """The declaration files an HTTP caller sees (connecting lazy servers within the default timeout)."""
        mcp = self.mcp_scope(tenant, policy)
        servers = await mcp.servers(deadline_s=self.settings.timeout_ms / 1000) if mcp is not None else []
        return self.api_table(view, servers)

    def quick_index(self, view: CatalogView) -> str:
        entries = [IndexEntry(e.callable_name, e.input_schema, e.output_schema, e.trusted) for e in view.entries()]
        return quick_index(entries)

    def retain(self, cell: Cell, json_text: str) -> RetainResult:
        """Keep an oversized final value as a saved result, or say why not."""
        try:
            ref = self._save(cell, json_text)
        except ResultsError as exc:
            reason = {"results_capacity": "result-store capacity",
                      "results_quota": "saved-results quota"}.get(exc.code, "result data allowance")
            return NotRetained(f"{reason}: {exc}")
        return describe_reference(ref, json_text)

    # ---- helpers ---------------------------------------------------------------------------------

    def _save(self, cell: Cell, json_text: str) -> str:
        """Keep JSON for the cell's run (inbox-sized allowance, TTL, network provenance)."""
        return self.results.save(self._scope(cell), json_text, cell.spec.limits.inbox_bytes,
                                 self.settings.results_ttl_seconds, network=cell.network_content)

    @staticmethod
    def _state(call: HostCall) -> CellTools:
        return call.cell.scope["guest"]  # type: ignore[no-any-return]

    @staticmethod
    def _scope(cell: Cell) -> ResultScope:
        return ResultScope(cell.spec.tenant, cell.spec.session_id or "", cell.spec.run_id or DEFAULT_RUN)

    @staticmethod
    def _ctx(call: HostCall) -> ToolContext:
        spec = call.cell.spec
        return ToolContext(tenant=spec.tenant, session_id=spec.session_id, run_id=spec.run_id,
                           cell_id=call.cell.id, call_id=f"req_{call.request_id}")

    @staticmethod
    def _sync_counters(call: HostCall, session: Any) -> None:
        t = call.cell.telemetry
        t.call_count = session.call_count + call.cell.scope.get("mcp_calls", 0)
        t.search_count = session.search_count
        t.describe_count = session.describe_count

    # ---- tools and catalog -----------------------------------------------------------------------

    async def _tool(self, call: HostCall) -> Any:
        state = self._state(call)
        name = call.args[0] if call.args else None
        params = call.args[1] if len(call.args) > 1 else {}
        try:
            outcome = await state.session.call_detailed(name, params, self._ctx(call))
        except ClientToolCall as need:
            raise NeedsCaller("client_tool", tool=need.callable_name, input=need.params) from None
        except ToolCallError as exc:
            if getattr(exc, "untrusted", False):
                call.cell.network_content = True
            raise GuestError(exc.message, exc.code, extra=exc.to_guest()) from None
        finally:
            self._sync_counters(call, state.session)
        if outcome.network:
            call.cell.network_content = True
        return RawJson(outcome.encoded)

    async def _search(self, call: HostCall) -> Any:
        state = self._state(call)
        query = call.args[0] if call.args else ""
        limit = call.args[1] if len(call.args) > 1 else None
        try:
            found = state.session.search(query, limit)
        except SearchQueryError as exc:
            raise GuestError(str(exc), "invalid_input", name="RangeError") from None
        except ToolCallError as exc:
            raise GuestError(exc.message, exc.code, name="RangeError") from None
        finally:
            self._sync_counters(call, state.session)
        if self.mcp is not None and len(found) < self.catalog.limits.clamp(limit):
            found = found + self._mcp_search(state, query, self.catalog.limits.clamp(limit) - len(found))
        return found

    def _mcp_search(self, state: CellTools, query: Any, limit: int) -> list[dict[str, Any]]:
        if not isinstance(query, str) or not query.strip():
            return []
        words = [w for w in query.lower().split() if w]
        scored = []
        for server in state.mcp_servers:
            for tool in server.tools:
                hay = f"{server.name} {server.identifier} {tool.name} {tool.identifier} {tool.description or ''}".lower()
                score = sum(hay.count(w) for w in words)
                if score:
                    scored.append((-score, server.identifier, tool.identifier, server, tool))
        scored.sort(key=lambda item: item[:3])
        out = []
        for _, _, _, server, tool in scored[:limit]:
            description = (tool.description or "")[:512]
            out.append({"callableName": f"MCP.{server.identifier}.{tool.identifier}", "toolName": tool.name,
                        "description": description, "source": "mcp", "apiPath": f"mcp/{server.identifier}.d.ts",
                        "mcp": [server.identifier, tool.identifier]})
        return out

    async def _describe(self, call: HostCall) -> Any:
        state = self._state(call)
        name = call.args[0] if call.args else None
        if isinstance(name, str) and name.startswith("MCP.") and state.mcp is not None:
            state.session.record_describe()
            self._sync_counters(call, state.session)
            call.cell.network_content = True  # remote MCP metadata is network-derived
            _, server, tool = (name.split(".", 2) + ["", ""])[:3]
            try:
                return state.mcp.api_server(server, tool or None, schema=True)
            except McpError as exc:
                raise GuestError(str(exc), exc.code) from None
        try:
            return state.session.describe(name)
        except ToolCallError as exc:
            raise GuestError(exc.message, exc.code, extra=exc.to_guest()) from None
        finally:
            self._sync_counters(call, state.session)

    # ---- API files -------------------------------------------------------------------------------

    def _api(self, call: HostCall) -> ApiFileTable:
        state = self._state(call)
        if state.api is None:
            state.api = self.api_table(state.view, state.mcp_servers)
        return state.api

    async def _api_list(self, call: HostCall) -> Any:
        prefix = call.args[0] if call.args else None
        try:
            return self._api(call).list(prefix)
        except ApiFileError as exc:
            raise GuestError(str(exc), "invalid_input") from None

    async def _api_read(self, call: HostCall) -> Any:
        path = call.args[0] if call.args else None
        if not isinstance(path, str):
            raise GuestError("API.read(path) needs a string path", "invalid_input", name="TypeError")
        try:
            return self._api(call).read(path)
        except ApiFileError as exc:
            raise GuestError(str(exc), "invalid_input") from None

    # ---- saved results ---------------------------------------------------------------------------

    def _results_allowed(self, call: HostCall) -> None:
        if call.cell.spec.restart_safe:
            raise GuestError("results are not available in restart-safe cells: a replay could not see them",
                             "results_unavailable")

    async def _results_save(self, call: HostCall) -> Any:
        self._results_allowed(call)
        text = jsoncodec.dumps_text(call.args[0] if call.args else None)
        try:
            ref = self._save(call.cell, text)
        except ResultsError as exc:
            raise GuestError(str(exc), exc.code, name="RangeError") from None
        return describe_reference(ref, text)

    async def _results_load(self, call: HostCall) -> Any:
        self._results_allowed(call)
        try:
            text, network = self.results.load_entry(self._scope(call.cell), call.args[0] if call.args else None)
        except ResultsError as exc:
            raise GuestError(str(exc), exc.code) from None
        if network:
            call.cell.network_content = True  # provenance travels with the saved data
        return RawJson(text.encode("utf-8"))

    async def _results_delete(self, call: HostCall) -> Any:
        self._results_allowed(call)
        return self.results.delete(self._scope(call.cell), call.args[0] if call.args else None)

    # ---- session store ---------------------------------------------------------------------------

    async def _writes(self, call: HostCall) -> CellStoreWrites:
        spec = call.cell.spec
        if self.store is None:
            raise GuestError("the session store is not configured on this server", "store_unavailable")
        if spec.session_id is None:
            raise GuestError("store/load need a session: send session_id with the exec request",
                             "store_unavailable")
        if spec.restart_safe or spec.headless:
            raise GuestError("store/load are not available in restart-safe or headless cells", "store_unavailable")
        state = self._state(call)
        if state.writes is None:
            try:
                snapshot = await self.store.get_all(spec.tenant, spec.session_id)
                usage = await self.store.usage(spec.tenant)
            except StoreError as exc:
                raise GuestError(f"session store unavailable: {exc}", "store_unavailable") from None
            if state.writes is None:
                state.session_network = NETWORK_MARK_KEY in snapshot
                state.writes = CellStoreWrites(snapshot, self.store_limits, usage)
        return state.writes

    async def _store_get(self, call: HostCall) -> Any:
        writes = await self._writes(call)
        key = call.args[0] if call.args else None
        self._check_key(key)
        text = writes.get(key)
        if text is not None and self._state(call).session_network:
            call.cell.network_content = True  # provenance survives persistence
        return None if text is None else {"value": jsoncodec.loads(text)}

    async def _store_set(self, call: HostCall) -> Any:
        writes = await self._writes(call)
        key = call.args[0] if call.args else None
        text = jsoncodec.dumps_text(call.args[1] if len(call.args) > 1 else None)
        self._store_write(writes, key, text)
        return None

    async def _store_delete(self, call: HostCall) -> Any:
        writes = await self._writes(call)
        self._store_write(writes, call.args[0] if call.args else None, None)
        return None

    @staticmethod
    def _check_key(key: Any) -> None:
        if isinstance(key, str) and key.startswith("\u0000"):
            raise GuestError("store keys may not start with a NUL character (reserved)", "store_type",
                             name="TypeError")

    def _store_write(self, writes: CellStoreWrites, key: Any, text: str | None) -> None:
        self._check_key(key)
        try:
            writes.set(key, text)
        except StoreTypeError as exc:
            raise GuestError(str(exc), "store_type", name="TypeError") from None
        except StoreLimitError as exc:
            raise GuestError(str(exc), exc.code, name="RangeError") from None

    async def _finish(self, cell: Cell, completed: bool) -> list[str]:
        state: CellTools | None = cell.scope.get("guest")
        if not completed or state is None or state.writes is None or not state.writes.has_pending():
            return []
        assert self.store is not None and cell.spec.session_id is not None
        sets, deletes = state.writes.pending()
        if cell.network_content and not state.session_network:
            sets = {**sets, NETWORK_MARK_KEY: "true"}
        try:
            await self.store.commit(cell.spec.tenant, cell.spec.session_id, sets, deletes)
        except StoreLimitError as exc:
            return [f"the cell's store writes were not saved: {exc}"]
        except StoreError as exc:
            return [f"session store persistence could not be confirmed ({exc}); the cell's store writes "
                    "may not have been saved"]
        return []


def store_limits(settings: Settings) -> StoreLimits:
    """The session-store limits: fixed per-session sizes (SPEC §6) and the tenant quotas of the settings."""
    return StoreLimits(max_tenant_bytes=settings.tenant_store_bytes, max_tenant_sessions=settings.tenant_max_sessions,
                       session_ttl_seconds=settings.session_ttl_seconds)
