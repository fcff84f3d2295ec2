"""The assembled application: every part, made and wired together once per process.

``build_components(settings)`` creates the worker pool, the tool catalog (plugins loaded, base
policy applied), the session store, the saved-results store, the MCP hub and the cell registry,
and registers each handler module's guest requests with the dispatcher.  Nothing here runs until
``Components.start()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .api_files.table import ApiFileTable
from .auth import KeyRing
from .cells.dispatch import Dispatcher, base_dispatcher
from .cells.registry import CellRegistry
from .cluster.identity import cell_id_prefix
from .cluster.replica import Replica, replica_for
from .demo import demo_settings
from .errors import ConfigError, InvalidRequest, WorkerGone
from .handlers.api_files import api_table, install_api_files
from .handlers.cell_tools import cell_tools, prepare_cell
from .handlers.saved_results import SavedResults
from .handlers.session_store import SessionStoreHandlers, store_limits
from .handlers.tools import install_tools
from .metrics import Metrics
from .process_tuning import tune_process
from .settings import ApiKey, Settings
from .stores import ResultsBackend, ResultsLimits, SessionStore, open_results, open_store
from .stores.errors import StoreError
from .stores.results_backend import LocalResults
from .tools.access import ToolAccess
from .tools.catalog import CatalogLimits, CatalogView, ToolCatalog
from .tools.clocks import ToolClocks
from .tools.errors import ToolError
from .tools.loader import load_plugins
from .tools.plugin import ToolSpec
from .tools.policy import ListedToolCheck, ToolPolicy, unknown_entry
from .tracing import NO_TRACING, Tracing, TracingConfig, start_tracing
from .workers.pool import WorkerPool
from .workers.sandbox import SandboxStatus, sandbox_options
from .workers.worker_process import start_worker

if TYPE_CHECKING:
    from .mcp.hub import McpHub

log = logging.getLogger("codemode")
#: How long /readyz waits for the session store's answer before it reports the store unavailable.
READY_STORE_SECONDS = 0.5


@dataclass
class Components:
    """The parts of one running service: what an HTTP route may need."""

    settings: Settings
    pool: WorkerPool
    cells: CellRegistry
    dispatcher: Dispatcher
    keys: KeyRing
    access: ToolAccess
    store: SessionStore | None
    results: ResultsBackend
    mcp: McpHub | None = None
    replica: Replica | None = None  # with a shared (Redis) store: this process as one replica of many
    metrics: Metrics = field(default_factory=Metrics)
    tracing: Tracing = NO_TRACING
    sandbox: SandboxStatus = field(default_factory=lambda: SandboxStatus({"mode": "auto"}))
    _policies: dict[str, ToolPolicy | None] = field(default_factory=dict)
    _store_sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.store is not None:
            try:
                await self.store.ping()
            except StoreError as exc:
                raise ConfigError(
                    f"session store {self.settings.resolved_store_url} does not answer: {exc}", need_param="store_url"
                ) from None
        if self.mcp is not None:
            await self.mcp.start()
        await self.pool.start()
        await self._check_sandbox()
        self.cells.start()
        self.access.start()
        if self.replica is not None:
            await self.replica.start()  # peers find it only once it can serve its cells
        tune_process()
        if self.store is not None:
            self._store_sweeper = asyncio.ensure_future(self._sweep_store())

    async def _check_sandbox(self) -> None:
        """Log the workers' confinement layers; with ``sandbox = "strict"``, refuse to run without them."""
        self.metrics.watch_sandbox(self.sandbox)
        reports = [self.pool.supply.sandbox] if self.pool.supply.sandbox is not None else []
        if not reports and self.settings.sandbox == "strict":
            try:  # one more start, for the reason: a strict worker names the layer it cannot have
                probe = await start_worker(self.pool.supply.options, self.pool.supply.frame_cap)
            except WorkerGone as exc:
                raise ConfigError(f"refusing to serve: {exc}", need_param="sandbox") from None
            probe.kill()
            await probe.proc.wait()
            reports += [probe.sandbox] if probe.sandbox is not None else []
        self.sandbox.adopt(reports[0] if reports else None)

    async def _sweep_store(self) -> None:
        """Remove expired sessions' data now and then (reads already treat them as gone)."""
        assert self.store is not None
        period = min(60.0, self.settings.session_ttl_seconds / 10)
        while True:
            try:
                removed = await self.store.expire()
                if removed:
                    log.info("removed %d expired sessions from the session store", removed)
                if not isinstance(self.results, LocalResults):  # shared: any replica sweeps it
                    await self.results.expire()
            except StoreError as exc:
                log.warning("could not remove expired sessions or saved results: %s", exc)
            await asyncio.sleep(period)

    async def close(self) -> None:
        if self._store_sweeper is not None:
            self._store_sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._store_sweeper
        await self.cells.close()
        await self.access.close()
        await self.pool.close()
        if self.mcp is not None:
            await self.mcp.close()
        if self.replica is not None:
            await self.replica.close()
        if self.store is not None:
            await self.store.close()
        await self.results.close()
        await self.tracing.close()

    async def readiness(self) -> dict[str, str]:
        checks = {"workers": "ok" if self.pool.ready else "no worker available"}
        if self.store is not None:
            try:
                async with asyncio.timeout(READY_STORE_SECONDS):  # /readyz answers within a second
                    await self.store.ping()
                checks["store"] = "ok"
            except TimeoutError:
                checks["store"] = f"unavailable: no answer within {READY_STORE_SECONDS} s"
            except StoreError as exc:
                checks["store"] = f"unavailable: {exc}"
        return checks

    def tool_policy_for(self, key: ApiKey) -> ToolPolicy | None:
        """The key's tool narrowing (``[[api_keys]] tools = {deny = [...]}``), parsed once."""
        if key.key not in self._policies:
            try:
                self._policies[key.key] = (
                    ToolPolicy.from_config(key.tools, where="api_keys.tools") if key.tools else None
                )
            except ToolError as exc:
                raise InvalidRequest(f"this API key's tool policy is invalid: {exc}") from None
        return self._policies[key.key]

    def view_for(self, key: ApiKey) -> CatalogView:
        return self.access.view_for(self.tool_policy_for(key))

    async def api_table_for(self, key: ApiKey) -> ApiFileTable:
        """The declaration files this key's cells see (native tools and MCP under its policy).

        Lazy MCP servers are connected within the default cell timeout.
        """
        policy = self.tool_policy_for(key)
        mcp = self.access.mcp_scope(key.tenant, policy)
        servers = await self.access.mcp_servers(mcp, self.settings.timeout_ms / 1000)
        return api_table(self.access.view_for(policy), servers)


def build_components(
    settings: Settings,
    *,
    extra_tools: Sequence[ToolSpec] = (),
    dispatcher: Dispatcher | None = None,
    store: SessionStore | None | bool = True,
    results_clock: Callable[[], float] | None = None,
    tracing: Tracing | None = None,
    cells_clock: Callable[[], float] | None = None,
) -> Components:
    """Create (not start) the service parts for ``settings``.

    ``cells_clock`` dates cell idleness and expiry (tests move it; the registry then sweeps often).

    ``extra_tools`` adds tools defined in code (tests, embedding) to the plugins of the settings;
    ``store=False`` runs without a session store; ``results_clock`` dates saved results (tests move it);
    ``tracing`` defaults to what the ``OTEL_*`` environment asks for (``service.tracing``).
    With a ``redis://`` store URL saved results live in Redis too, shared by replicas.
    """
    settings = demo_settings(settings)
    sandbox = sandbox_options(settings.sandbox, settings.worker_user)
    pool = WorkerPool(
        size=settings.workers,
        cap=settings.worker_cap,
        max_cells=settings.worker_max_cells,
        frame_cap=settings.max_snapshot_bytes + settings.max_request_bytes + 16 * 1024 * 1024,
        options={
            "rlimit_as_bytes": settings.rlimit_as_bytes,
            "rlimit_cpu_seconds": settings.worker_cpu_seconds,
            "stack_bytes": 1024 * 1024,
            "sandbox": sandbox,
        },
        nice=settings.worker_nice,
        burst=settings.burst_slots,
        replacements_per_minute=settings.tenant_worker_replacements_per_minute,
        acquire_timeout_s=settings.acquire_timeout_ms / 1000,
        max_runtimes=settings.worker_max_runtimes,
        max_parked_bytes=settings.worker_max_parked_bytes,
        snapshot_bytes=settings.max_snapshot_bytes,
    )
    try:
        loaded = load_plugins(settings.tools.plugins, entry_points=settings.tools.entry_points)
        t = settings.tools
        policy = ToolPolicy.from_config(
            {
                **({"allow": list(t.allow)} if t.allow else {}),  # no allow list: every non-optional tool
                "deny": list(t.deny),
                **({"profile": t.profile} if t.profile else {}),
            }
        )
        catalog = ToolCatalog.build(
            list(loaded.tools) + list(extra_tools),
            loaded.hooks,
            policy,
            limits=CatalogLimits(settings.search_default_limit, settings.max_search_limit),
            clocks=ToolClocks(settings.tool_timeout_seconds, settings.tool_timeout_cap_seconds),
        )
    except ToolError as exc:
        raise ConfigError(f"tools: {exc}", need_param="tools") from None
    session_store: SessionStore | None = None
    if store is True:
        try:
            session_store = open_store(
                settings.resolved_store_url, store_limits(settings), timeout_seconds=settings.store_timeout_ms / 1000
            )
        except StoreError as exc:
            raise ConfigError(str(exc), need_param="store_url") from None
    elif store is not False and store is not None:
        session_store = store  # type: ignore[assignment]
    mcp = None
    if settings.mcp_servers:
        from .mcp.hub import McpHub

        # An unusable entry raises McpConfigError, a ConfigError naming the server's table.
        mcp = McpHub(settings.mcp_servers, tenants=len({key.tenant for key in settings.api_keys}))
    listed_check = _check_policy_entries(settings, catalog, mcp.identifiers() if mcp is not None else [], policy)
    if mcp is not None:

        def report_unlisted(server: tuple[str, str], tools: list[tuple[str, str]]) -> None:
            for problem in listed_check.problems(server, tools):
                log.warning("%s", problem)

        mcp.on_listed = report_unlisted
    try:
        results = open_results(
            settings.resolved_store_url if store is True else "",
            ResultsLimits(tenant_max_bytes=settings.tenant_results_bytes, max_bytes=settings.results_max_bytes),
            results_clock,
            settings.store_timeout_ms / 1000,
        )
    except StoreError as exc:
        raise ConfigError(str(exc), need_param="store_url") from None
    access = ToolAccess(settings, catalog, mcp, tool_policy=policy, run_counters=session_store, sandbox=sandbox)
    saved = SavedResults(settings, results)
    dispatcher = dispatcher or base_dispatcher()
    install_tools(dispatcher, catalog.limits)
    install_api_files(dispatcher)
    saved.install(dispatcher)
    store_handlers = SessionStoreHandlers(session_store, store_limits(settings))
    store_handlers.install(dispatcher)
    if mcp is not None:
        from .mcp.guest_requests import install_mcp

        install_mcp(dispatcher, cell_tools)
    tracing = start_tracing(TracingConfig.from_env()) if tracing is None else tracing
    prepare = functools.partial(prepare_cell, access, [store_handlers.prefetch])
    cells = CellRegistry(
        settings,
        pool,
        dispatcher,
        prepare=prepare,
        retainer=saved,
        tracing=tracing,
        clock=cells_clock or time.monotonic,
        sweep_seconds=1.0 if cells_clock is None else 0.02,
    )
    if isinstance(results, LocalResults):
        cells.sweepers.append(results.store.expire)
    replica = replica_for(settings, session_store)
    if replica is not None:
        cells.cell_id_prefix = cell_id_prefix(replica.replica_id)
    if mcp is not None:
        cells.sweepers.append(mcp.close_idle)
    return Components(
        settings=settings,
        pool=pool,
        cells=cells,
        dispatcher=dispatcher,
        keys=KeyRing(settings),
        access=access,
        store=session_store,
        results=results,
        mcp=mcp,
        replica=replica,
        tracing=tracing,
        sandbox=SandboxStatus(sandbox),
    )


def _check_policy_entries(
    settings: Settings, catalog: ToolCatalog, servers: list[tuple[str, str]], base: ToolPolicy
) -> ListedToolCheck:
    """Refuse every `[tools]` and `[[api_keys]] tools` entry that names nothing (a typo would hide or
    expose tools silently), and unusable key tables; return the check of `mcp:<server>/<tool>`
    entries, which can only run once each server lists its tools."""
    names = [name for pair in servers for name in pair]
    policies = [("tools", base, tuple(settings.tools.approve))]
    for index, key in enumerate(settings.api_keys):
        where = f"api_keys[{index}].tools"
        try:
            parsed = ToolPolicy.from_config(key.tools or None, where=where)
        except ToolError as exc:
            raise ConfigError(str(exc), need_param=where) from None
        policies.append((where, parsed, parsed.approve))
    tables: list[tuple[str, tuple[str, ...]]] = []
    for where, policy, approve in policies:
        for kind, entries in (("allow", policy.allow or ()), ("deny", policy.deny)):
            problem = unknown_entry(entries, f"{where}.{kind}", catalog.subjects, names)
            if problem is not None:
                raise ConfigError(problem, need_param=f"{where}.{kind}")
            tables.append((f"{where}.{kind}", entries))
        tables.append((f"{where}.approve", approve))  # checked with the approvals (ToolAccess)
    return ListedToolCheck(tables)
