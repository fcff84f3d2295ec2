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

from bridge.messages import SandboxOptions

from .api.keyed_tools import KeyedTools
from .auth import KeyRing
from .capabilities.api_files import install_api_files
from .capabilities.cell_tools import CellTools, cell_tools, prepare_cell
from .capabilities.saved_results import SavedResults
from .capabilities.session_store import SessionStoreHandlers, store_limits
from .capabilities.tools import install_tools
from .cluster.identity import cell_id_prefix
from .cluster.replica import Replica, replica_for
from .cpus import idle_halt
from .demo import demo_settings
from .drain import Drain
from .errors import ConfigError, WorkerGone
from .helpers.pool import HelperPool
from .metrics import Metrics
from .process_tuning import tune_process
from .runtime.dispatch import CellContext, Dispatcher, base_dispatcher
from .runtime.json_texts import JsonTexts
from .runtime.parked_cells import ParkedCells, ParkedVault
from .runtime.registry import CellRegistry
from .runtime.workers.pool import WorkerPool
from .runtime.workers.process import start_worker
from .runtime.workers.sandbox import SandboxStatus, sandbox_options
from .settings import Settings
from .stores import RedisHA, ResultsBackend, ResultsLimits, SessionStore, open_results, open_store
from .stores.errors import StoreError
from .stores.results_backend import LocalResults
from .tools.access import ToolAccess
from .tools.catalog import CatalogLimits, ToolCatalog
from .tools.clocks import ToolClocks
from .tools.errors import ToolError
from .tools.loader import load_plugins
from .tools.plugin import ToolSpec
from .tools.policy import ListedToolCheck, ToolPolicy, unknown_entry
from .tracing import NO_TRACING, Tracing, TracingConfig, start_tracing

if TYPE_CHECKING:
    from .mcp.hub import McpHub

log = logging.getLogger("codemode")


@dataclass
class Components:
    """The parts of one running service, started and closed together.

    The faces (HTTP routes, the MCP facade, the command line) are built from the parts they use
    (``service.http.app`` hands each route group its own); this object owns their life cycle.
    """

    settings: Settings
    pool: WorkerPool
    cells: CellRegistry
    dispatcher: Dispatcher
    keys: KeyRing
    access: ToolAccess
    helpers: HelperPool  # the processes that decode large request bodies and check client tool schemas
    tools: KeyedTools  # what each API key may call
    store: SessionStore | None
    results: ResultsBackend
    mcp: McpHub | None = None
    replica: Replica | None = None  # with a shared (Redis) store: this process as one replica of many
    drain: Drain | None = None  # what SIGTERM runs before the server stops (service/drain.py)
    metrics: Metrics = field(default_factory=Metrics)
    tracing: Tracing = NO_TRACING
    sandbox: SandboxStatus = field(default_factory=lambda: SandboxStatus({"mode": "auto"}))
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
        self.helpers.start()
        if self.replica is not None:
            await self.replica.start()  # peers find it only once it can serve its cells
        tune_process()
        note = idle_halt()
        if note is not None:
            log.info("%s", note)
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
        await self.helpers.close()
        await self.pool.close()
        if self.mcp is not None:
            await self.mcp.close()
        if self.replica is not None:
            await self.replica.close()
        if self.store is not None:
            await self.store.close()
        await self.results.close()
        await self.tracing.close()


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

    ``extra_tools`` adds tools defined in code (tests, embedding) to the plugins of the settings;
    ``store=False`` runs without a session store; ``results_clock`` dates saved results and ``cells_clock``
    cell idleness and expiry (tests move them; the registry then sweeps often); ``tracing`` defaults to what
    the ``OTEL_*`` environment asks for.  With a ``redis://`` store URL saved results live in Redis too.
    """
    settings = demo_settings(settings)
    sandbox, helpers = _sandbox_and_helpers(settings)
    policy, catalog = _tool_catalog(settings, extra_tools)
    session_store = _session_store(settings, store)
    mcp = _mcp_hub(settings, catalog, policy)
    results = _results(settings, shared=store is True, clock=results_clock)
    access = _tool_access(settings, catalog, policy, mcp, session_store, helpers)
    saved = SavedResults(settings, results)
    store_handlers = SessionStoreHandlers(session_store, store_limits(settings))
    dispatcher = _guest_requests(dispatcher or base_dispatcher(), catalog, saved, store_handlers, mcp)
    tracing = start_tracing(TracingConfig.from_env()) if tracing is None else tracing
    pool = _worker_pool(settings, sandbox)
    cells = CellRegistry(
        settings,
        pool,
        dispatcher,
        prepare=functools.partial(prepare_cell, access, mcp, [store_handlers.prefetch]),
        retainer=saved,
        tracing=tracing,
        clock=cells_clock or time.monotonic,
        sweep_seconds=1.0 if cells_clock is None else 0.02,
        json_texts=JsonTexts(helpers),
    )
    replica = replica_for(settings, session_store)
    _attach_to_registry(cells, results, mcp, replica)
    cells.parked_cells = _parked_cells(settings, session_store, replica)
    return Components(
        settings=settings,
        pool=pool,
        cells=cells,
        dispatcher=dispatcher,
        keys=KeyRing(settings),
        access=access,
        helpers=helpers,
        tools=KeyedTools(access, mcp, settings.timeout_ms / 1000),
        store=session_store,
        results=results,
        mcp=mcp,
        replica=replica,
        drain=Drain(cells, replica, seconds=settings.drain_seconds, keep_seconds=settings.cell_ttl_seconds),
        tracing=tracing,
        sandbox=SandboxStatus(sandbox),
    )


def _attach_to_registry(
    cells: CellRegistry, results: ResultsBackend, mcp: McpHub | None, replica: Replica | None
) -> None:
    """Give the registry's sweep what else expires (in-process saved results, idle MCP connections), and
    prefix its cell ids with this replica's id (a peer routes a cell by it)."""
    if isinstance(results, LocalResults):
        cells.sweepers.append(results.store.expire)
    if mcp is not None:
        cells.sweepers.append(mcp.close_idle)
    if replica is not None:
        cells.cell_id_prefix = cell_id_prefix(replica.replica_id)


def _parked_cells(settings: Settings, store: SessionStore | None, replica: Replica | None) -> ParkedCells | None:
    """Where parked Python cells are written out (the session store, shared by the replicas or kept in the
    SQLite file), when Python cells run at all."""
    if not settings.python_cells or not isinstance(store, ParkedVault):
        return None
    return ParkedCells(
        store,
        ttl_seconds=settings.cell_ttl_seconds,
        max_snapshot_bytes=settings.max_snapshot_bytes,
        claimant="" if replica is None else replica.replica_id,
        carries=_no_store_writes,
    )


def _no_store_writes(context: CellContext) -> bool:
    """A cell's buffered session-store writes live in this process only: such a cell is not written out."""
    tools = context.tools
    return not (isinstance(tools, CellTools) and tools.writes is not None and tools.writes.has_pending())


def _worker_pool(settings: Settings, sandbox: SandboxOptions) -> WorkerPool:
    return WorkerPool(
        size=settings.workers,
        slots=settings.running_slot_count,
        cap=settings.worker_cap,
        max_cells=settings.worker_max_cells,
        frame_cap=settings.max_snapshot_bytes + settings.max_request_bytes + 16 * 1024 * 1024,
        options={
            "rlimit_as_bytes": settings.rlimit_as_bytes,
            "rlimit_cpu_seconds": settings.worker_cpu_seconds,
            "stack_bytes": 1024 * 1024,
            "sandbox": sandbox,
            "python": settings.python_cells,
        },
        nice=settings.worker_nice,
        burst=settings.burst_slots,
        replacements_per_minute=settings.tenant_worker_replacements_per_minute,
        acquire_timeout_s=settings.acquire_timeout_ms / 1000,
        max_runtimes=settings.worker_max_runtimes,
        max_parked_bytes=settings.worker_max_parked_bytes,
        snapshot_bytes=settings.max_snapshot_bytes,
    )


def _tool_access(
    settings: Settings,
    catalog: ToolCatalog,
    policy: ToolPolicy,
    mcp: McpHub | None,
    session_store: SessionStore | None,
    helpers: HelperPool,
) -> ToolAccess:
    """Who may call which tool: the catalog and the MCP servers' identifiers under the policy."""
    mcp_names = [name for pair in (mcp.identifiers() if mcp is not None else []) for name in pair]
    return ToolAccess(settings, catalog, mcp_names, tool_policy=policy, run_counters=session_store, helpers=helpers)


def _sandbox_and_helpers(settings: Settings) -> tuple[SandboxOptions, HelperPool]:
    """The confinement every worker and helper is started with (built once: see ``sandbox_options``),
    and the helper processes (started by ``Components.start``)."""
    sandbox = sandbox_options(settings.sandbox, settings.worker_user, python_cells=settings.python_cells)
    helpers = HelperPool(
        {"sandbox": sandbox, "rlimit_as_bytes": settings.rlimit_as_bytes},
        settings.worker_isolation,
        max_live=settings.max_helpers,
    )
    return sandbox, helpers


def _tool_catalog(settings: Settings, extra_tools: Sequence[ToolSpec]) -> tuple[ToolPolicy, ToolCatalog]:
    """The base tool policy of ``[tools]`` and the catalog of the plugins' tools and ``extra_tools`` under it."""
    t = settings.tools
    try:
        loaded = load_plugins(t.plugins, entry_points=t.entry_points)
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
    return policy, catalog


def _session_store(settings: Settings, store: SessionStore | None | bool) -> SessionStore | None:
    """The store ``store`` asks for: ``True`` opens the configured one, ``False``/``None`` none, else itself."""
    if store is True:
        try:
            return open_store(
                settings.resolved_store_url,
                store_limits(settings),
                timeout_seconds=settings.store_timeout_ms / 1000,
                ha=redis_ha(settings),
            )
        except StoreError as exc:
            raise ConfigError(str(exc), need_param="store_url") from None
    if store is False or store is None:
        return None
    return store


def redis_ha(settings: Settings) -> RedisHA:
    """The Sentinels and write acknowledgement of a ``redis://`` store (service/stores/redis_target.py)."""
    return RedisHA(
        sentinels=settings.redis_sentinels,
        master_name=settings.redis_master_name,
        sentinel_password=settings.redis_sentinel_password,
        wait_replicas=settings.redis_wait_replicas,
    )


def _mcp_hub(settings: Settings, catalog: ToolCatalog, policy: ToolPolicy) -> McpHub | None:
    """The hub of ``[mcp.servers]`` (None without any), after every policy entry was checked."""
    mcp = None
    if settings.mcp_servers:
        from .mcp.hub import McpHub

        # An unusable entry raises McpConfigError, a ConfigError naming the server's table.
        mcp = McpHub(settings.mcp_servers, tenants=len({key.tenant for key in settings.api_keys}))
    listed_check = _check_policy_entries(settings, catalog, mcp.identifiers() if mcp is not None else [], policy)
    if mcp is not None:
        mcp.on_listed = functools.partial(_report_unlisted, listed_check)
    return mcp


def _report_unlisted(check: ListedToolCheck, server: tuple[str, str], tools: list[tuple[str, str]]) -> None:
    """Warn of each ``mcp:<server>/<tool>`` policy entry that names no tool the server listed."""
    for problem in check.problems(server, tools):
        log.warning("%s", problem)


def _results(settings: Settings, *, shared: bool, clock: Callable[[], float] | None) -> ResultsBackend:
    """The saved-results store: in Redis beside a ``redis://`` session store (``shared``), else in memory."""
    try:
        return open_results(
            settings.resolved_store_url if shared else "",
            ResultsLimits(tenant_max_bytes=settings.tenant_results_bytes, max_bytes=settings.results_max_bytes),
            clock,
            settings.store_timeout_ms / 1000,
            redis_ha(settings),
        )
    except StoreError as exc:
        raise ConfigError(str(exc), need_param="store_url") from None


def _guest_requests(
    dispatcher: Dispatcher,
    catalog: ToolCatalog,
    saved: SavedResults,
    store_handlers: SessionStoreHandlers,
    mcp: McpHub | None,
) -> Dispatcher:
    """``dispatcher`` with every handler module's guest requests registered."""
    install_tools(dispatcher, catalog.limits)
    install_api_files(dispatcher)
    saved.install(dispatcher)
    store_handlers.install(dispatcher)
    if mcp is not None:
        from .capabilities.mcp import install_mcp

        install_mcp(dispatcher, cell_tools)
    return dispatcher


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
