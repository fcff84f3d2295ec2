"""One immutable settings object, read once at start and passed down.

Every setting is declared once, as a field of ``Settings``: its type, default, range, and where it
lives in the TOML file (``setting("limits", ...)`` is ``[limits] <name> = ...`` and the environment
variable ``CODEMODE_<NAME>``; ``section("mcp.servers", ...)`` is a whole TOML item).
``service.settings_load.load_settings`` layers the sources: CLI flag > environment > TOML file >
default; a bad value is refused here (``validated``), naming the key and what it allows.

This is the only module that imports pydantic-settings.
"""

from __future__ import annotations

import difflib
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BeforeValidator, Field, SkipValidation, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from guest_runtime.guest_config import MAX_PENDING_REQUESTS, MAX_REQUEST_VALUES

from .cpus import usable_cpus
from .errors import ConfigError
from .hosts import parse_allowed_host
from .settings_mcp import McpServerConfig

MiB = 1024 * 1024
ENV_PREFIX = "CODEMODE_"
CONFIG_VARIABLE = ENV_PREFIX + "CONFIG"
#: The API key a local process acts with (``codemode mcp`` serves as its tenant); not a server setting.
API_KEY_VARIABLE = ENV_PREFIX + "API_KEY"
#: The server ``codemode exec`` runs its cell on (as ``--url``); a client's variable, not a server setting.
URL_VARIABLE = ENV_PREFIX + "URL"


def setting(table: str, default: Any, low: int | None = None, high: int | None = None, doc: str = "") -> Any:
    """A scalar: ``[table] <name>`` in the file and ``CODEMODE_<NAME>`` in the environment."""
    return Field(default, ge=low, le=high, description=doc, json_schema_extra={"table": table})


def section(path: str, default: Any, doc: str) -> Any:
    """A structured value: the whole TOML item at ``path`` (file only, no environment variable)."""
    return Field(default, description=doc, json_schema_extra={"path": path})


def _not_a_boolean(value: object) -> object:
    # bool is an int to Python; `port = true` in a file is a mistake, not port 1.
    if isinstance(value, bool):
        raise ValueError("a boolean is not an integer")
    return value


Int = Annotated[int, BeforeValidator(_not_a_boolean)]


def _comma_list(value: object) -> object:
    # The environment spells a list as "a,b"; the file as a TOML array.
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


CommaList = Annotated[tuple[str, ...], BeforeValidator(_comma_list)]
NonEmpty = Annotated[str, Field(min_length=1)]


@dataclass(frozen=True)
class ApiKey:
    key: NonEmpty
    tenant: NonEmpty = "default"
    # The raw [[api_keys]] tools table (allow, deny, approve, profile), parsed by the tool policy.
    tools: Mapping[str, Any] = field(default_factory=dict)
    # The MCP facade's model may answer this key's approvals through `wait`: it approves its own calls.
    mcp_model_approvals: bool = False


@dataclass(frozen=True)
class ToolSettings:
    plugins: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    profile: str | None = None
    entry_points: bool = True
    approve: tuple[str, ...] = ()  # calls of these wait for the API caller's approval (service.tools.approvals)


class Settings(BaseSettings):
    """Every setting.  ``Settings(**values)`` is exactly ``values`` over the defaults (it reads no
    environment); ``load_settings`` is what reads the environment and the file, once, at start."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix=ENV_PREFIX)

    # [server]
    host: str = setting("server", "127.0.0.1", doc="bind address")
    port: Int = setting("server", 8000, 0, 65535, "bind port")
    data_dir: str = setting(
        "server", "", doc="directory for the default SQLite store (default ~/.local/share/codemode)"
    )
    store_url: str = setting("server", "", doc="sqlite:///PATH or redis://HOST:PORT/DB")
    store_timeout_ms: Int = setting(
        "server", 2000, 50, 60000, "one session-store or saved-results call, retries included; then store_unavailable"
    )
    # A highly available Redis (service/stores/redis_target.py): the Sentinels that name the primary, and
    # how many replicas must confirm a write before callers are told it is done.
    redis_sentinels: CommaList = setting(
        "server",
        (),
        doc="HOST:PORT of Redis Sentinels; the redis:// store_url then gives only credentials and database",
    )
    redis_master_name: NonEmpty = setting("server", "mymaster", doc="the name the Sentinels monitor the primary by")
    redis_sentinel_password: str = setting("server", "", doc="password of the Sentinels themselves (if they ask one)")
    redis_wait_replicas: Int = setting(
        "server", 0, 0, 16, "replicas that must confirm a store write (Redis WAIT) before it counts as done"
    )
    log_level: str = setting("server", "info", doc="uvicorn log level")
    # Connection hygiene of `codemode serve` (a peer that trickles bytes must not hold a socket forever).
    header_read_timeout_seconds: Int = setting(
        "server", 10, 1, 3600, "close a connection whose request headers take longer"
    )
    body_read_timeout_seconds: Int = setting(
        "server", 60, 1, 3600, "close a connection whose request body takes longer after its headers"
    )
    keep_alive_timeout_seconds: Int = setting("server", 5, 1, 3600, "close an idle keep-alive connection")
    max_connections: Int = setting(
        "server", 1000, 1, 1_000_000, "open connections of `codemode serve`; further ones are closed at once"
    )
    response_write_timeout_seconds: Int = setting(
        "server", 15, 1, 3600, "abort a connection whose unsent response bytes do not shrink for this long"
    )
    max_unsent_bytes: Int = setting(
        "server", MiB, 64 * 1024, 64 * MiB, "response bytes one connection's socket buffer may hold unsent"
    )
    metrics_require_key: bool = setting("server", False, doc="GET /metrics needs a valid API key")
    # Replicas sharing a redis:// store (service/cluster/): where peers reach this one, and how long
    # after its last heartbeat a replica counts as stopped.
    advertise_url: str = setting(
        "server",
        "",
        doc="URL where peer replicas reach this one "
        "(default http://<host>:<port>; the machine's name for a wildcard host)",
    )
    replica_ttl_seconds: Int = setting(
        "server", 6, 2, 60, "a replica without a heartbeat for this long is stopped; its cells fail"
    )
    drain_seconds: Int = setting(
        "server",
        30,
        0,
        3600,
        "on SIGTERM, stop admitting cells and let running legs finish for up to this long before stopping",
    )
    # Without API keys: the Host names (besides loopback ones) requests may be addressed to (service/hosts.py).
    allowed_hosts: CommaList = setting(
        "server", (), doc="host names or addresses (optionally :port) a server without API keys also answers"
    )
    # Demo mode (service/demo/): the example shipping plugin and the bundled travel MCP server.
    demo: bool = setting("server", False, doc="load the example shipping plugin and the bundled travel MCP server")
    mcp_model_approvals: bool = setting(
        "server",
        False,
        doc="without API keys (and for `codemode mcp` without CODEMODE_API_KEY), the MCP facade's model may answer "
        "approvals through `wait`: it approves its own calls (per key: [[api_keys]] mcp_model_approvals)",
    )
    # [limits]: request defaults and the server's caps
    timeout_ms: Int = setting("limits", 10000, 100, 60000, "default wall clock per exec/wait call")
    max_timeout_ms: Int = setting("limits", 60000, 100, 60000, "largest timeout_ms a request may ask")
    memory_limit_bytes: Int = setting("limits", 64 * MiB, MiB, 1024 * MiB, "default guest heap cap")
    max_memory_limit_bytes: Int = setting("limits", 1024 * MiB, MiB, 1024 * MiB, "largest memory_limit_bytes")
    max_output_bytes: Int = setting("limits", 65536, 1024, 10 * MiB, "default output budget")
    max_snapshot_bytes: Int = setting("limits", 10 * MiB, 1024, 256 * MiB, "heap cap for parking; inbox cap")
    max_parked_cells: Int = setting("limits", 1024, 1, 65536, "parked cells per replica (they share worker processes)")
    cell_ttl_seconds: Int = setting("limits", 900, 1, 86400, "idle time before a parked cell expires")
    mcp_session_idle_seconds: Int = setting(
        "limits", 600, 10, 86400, "an MCP session of a 2025-11-25 client idle this long at /mcp is closed"
    )
    results_ttl_seconds: Int = setting("limits", 3600, 1, 86400, "lifetime of saved results")
    max_calls_per_cell: Int = setting("limits", 200, 1, 100000, "tool calls one cell may make")
    max_searches_per_cell: Int = setting("limits", 200, 1, 100000, "catalog.search calls one cell may make")
    tool_failures_per_run: Int = setting(
        "limits", 4, 1, 1000, "counted failures of one tool before it is blocked for the run"
    )
    failures_per_run: Int = setting(
        "limits", 8, 1, 10000, "counted tool failures of a run before every tool call is refused"
    )
    max_pending_requests: Int = setting(
        "limits", MAX_PENDING_REQUESTS, 1, 4096, "host requests one cell may have in flight"
    )
    # Cells that never finish (service/runtime/life_bounds.py): checked when a leg would start.
    # /v1/monty (service/monty_relay/): Monty's wire protocol relayed to a confined `monty subprocess` per connection.
    monty_max_frame_bytes: Int = setting(
        "limits",
        8 * MiB,
        64 * 1024,
        256 * MiB,
        "/v1/monty: largest frame either way (a larger one closes the connection)",
    )
    monty_max_values: Int = setting(
        "limits", 100_000, 16, 10_000_000, "/v1/monty: values (arena nodes) and list entries one frame may carry"
    )
    monty_max_recursion_depth: Int = setting(
        "limits", 1000, 10, 100_000, "/v1/monty: largest max_recursion_depth a client may ask"
    )
    monty_idle_seconds: Int = setting(
        "limits", 600, 1, 86_400, "/v1/monty: close a connection whose client sends no frame for this long"
    )
    max_legs_per_cell: Int = setting(
        "limits", 10_000, 1, 10_000_000, "legs (the exec, then each wait) one cell may run; then it ends failed"
    )
    max_cell_lifetime_seconds: Int = setting(
        "limits", 86_400, 1, 30 * 86_400, "how long after its exec a cell may start another leg; then it ends failed"
    )
    # Wall clocks of tool calls (service/tools/clocks.py): a native tool's default, and the cap no
    # tool or MCP server may declare more than.
    tool_timeout_seconds: Int = setting(
        "limits", 600, 1, 86400, "wall clock of one native tool call unless the tool declares its own timeout_s"
    )
    tool_timeout_cap_seconds: Int = setting(
        "limits", 1800, 1, 86400, "largest wall clock a tool or MCP server may declare; a plugin over it is refused"
    )
    search_default_limit: Int = setting("limits", 8, 1, 50, "catalog.search default limit")
    max_search_limit: Int = setting("limits", 50, 1, 50, "catalog.search largest limit")
    max_request_bytes: Int = setting("limits", 8 * MiB, 1024, 256 * MiB, "JSON arguments of one guest request")
    max_request_values: Int = setting(
        "limits",
        MAX_REQUEST_VALUES,
        1000,
        100_000_000,
        "JSON values one guest request or one HTTP request body may carry",
    )
    max_exec_body_bytes: Int = setting("limits", 2 * MiB, 1024, 64 * MiB, "exec request body cap")
    # Event streams (GET /v1/cells/{id}/events)
    events_heartbeat_seconds: Int = setting("limits", 15, 1, 3600, "keep-alive comment on an idle event stream")
    events_buffer_bytes: Int = setting(
        "limits", MiB, 4096, 256 * MiB, "encoded events one cell's log keeps (oldest dropped first)"
    )
    events_retain_seconds: Int = setting(
        "limits", 60, 1, 86400, "a finished cell's events stay readable this long after its result went out"
    )
    events_retained_bytes: Int = setting(
        "limits", 64 * MiB, MiB, 1 << 40, "event logs of finished cells kept in all (oldest dropped first)"
    )
    # [workers]
    workers: Int = setting("workers", 4, 1, 256, "fresh worker processes kept ready for new cells")
    running_slots: Int = setting(
        "workers",
        0,
        0,
        256,
        "legs that run guest code at once, before burst_slots (0: one per CPU the service may use, at least 2)",
    )
    max_workers: Int = setting(
        "workers", 0, 0, 65536, "hard cap on worker processes (0: 2 x workers + max_parked_cells)"
    )
    worker_max_runtimes: Int = setting(
        "workers",
        64,
        1,
        4096,
        "cells (of one principal: worker_isolation) whose QuickJS runtimes one worker process holds",
    )
    worker_max_parked_bytes: Int = setting(
        "workers",
        256 * MiB,
        MiB,
        1 << 40,
        "a worker takes a new cell only while its parked heaps plus max_snapshot_bytes fit in this",
    )
    worker_max_cells: Int = setting("workers", 100_000, 1, 1_000_000, "cells a worker runs before it is recycled")
    kill_grace_ms: Int = setting("workers", 1000, 50, 60000, "SIGKILL a worker this long past its deadline")
    acquire_timeout_ms: Int = setting("workers", 5000, 10, 120000, "wait for a free worker before 503")
    tenant_max_concurrency: Int = setting("workers", 32, 1, 100000, "running exec/wait calls per tenant")
    worker_rlimit_as_bytes: Int = setting(
        "workers", 0, 0, 1 << 44, "RLIMIT_AS of workers (0: max memory + parked bytes + 1 GiB)"
    )
    worker_cpu_seconds: Int = setting(
        "workers", 3600, 1, 1 << 30, "RLIMIT_CPU of a worker; it is replaced after using 80% of it"
    )
    worker_nice: Int = setting(
        "workers",
        15,
        0,
        19,
        "niceness steps workers run below the service; 0: the same priority (the "
        "event loop then competes with guest code for the CPU)",
    )
    max_helpers: Int = setting(
        "workers",
        4,
        1,
        256,
        "helper processes (they decode request bodies over 256 KiB and check client tool schemas) serving "
        "principals at once, besides one spare; the least recently used idle one is stopped to make room",
    )
    # Kernel confinement of workers and helpers (guest_runtime/confinement.py).
    sandbox: Literal["strict", "auto", "off"] = setting(
        "workers",
        "auto",
        doc="strict: refuse to start unless every confinement layer is in force; auto: every layer "
        "the kernel offers; off: none (logged as a warning)",
    )
    worker_user: NonEmpty = setting(
        "workers", "nobody", doc="user (name or uid) workers switch to when the service runs as root"
    )
    python_cells: bool = setting(
        "workers",
        True,
        doc="run Python cells (Monty); false: worker processes never load Monty (about 3.5 MiB of RSS and 15-50 ms "
        "of start-up less each) and a Python cell is refused (422, need_param language)",
    )
    worker_isolation: Literal["tenant", "key", "session", "cell"] = setting(
        "workers",
        "key",
        doc="who may share a worker process, for its whole life (service/principals.py): tenant; key (the "
        "tenant and the key's tool policy); session (one key's cells of one session); cell (a fresh process "
        "per cell, stopped when it ends)",
    )
    burst_slots: Int = setting(
        "workers",
        4,
        0,
        256,
        "running slots above `running_slots` for tenants holding fewer slots than another (so one tenant's "
        "long cells never make another tenant's cell wait)",
    )
    # [tenants]: per-tenant quotas, so one tenant cannot take what another needs
    tenant_max_parked_cells: Int = setting(
        "tenants", 256, 1, 65536, "parked cells per tenant (within max_parked_cells)"
    )
    tenant_max_waits: Int = setting("tenants", 16, 1, 100000, "concurrent wait calls per tenant")
    tenant_max_event_streams: Int = setting("tenants", 16, 1, 100000, "open event streams per tenant")
    tenant_results_bytes: Int = setting("tenants", 64 * MiB, 1024, 1 << 40, "saved-result bytes per tenant")
    results_max_bytes: Int = setting("tenants", 512 * MiB, 1024, 1 << 40, "saved-result bytes of all tenants")
    tenant_store_bytes: Int = setting("tenants", 32 * MiB, 1024, 1 << 40, "session-store bytes per tenant")
    tenant_max_sessions: Int = setting("tenants", 1000, 1, 10_000_000, "sessions with stored data per tenant")
    session_ttl_seconds: Int = setting(
        "tenants", 7 * 86400, 60, 10 * 365 * 86400, "a session's stored data is removed this long after its last write"
    )
    tenant_finished_kept: Int = setting("tenants", 1000, 1, 1_000_000, "finished-cell summaries kept per tenant")
    max_tenants_tracked: Int = setting(
        "tenants", 10000, 1, 1_000_000, "tenants whose finished-cell summaries are kept (least recent dropped)"
    )
    mcp_sessions_per_tenant: Int = setting(
        "tenants",
        64,
        1,
        100_000,
        "MCP sessions of 2025-11-25 clients at /mcp per tenant (then the least recently used idle one is closed)",
    )
    tenant_held_bytes: Int = setting(
        "tenants",
        256 * MiB,
        1024 * 1024,
        1 << 40,
        "bytes the service holds for one tenant's live cells: pending arguments, unconsumed replies, "
        "uncollected output and final envelopes",
    )
    tenant_worker_replacements_per_minute: Int = setting(
        "tenants",
        60,
        1,
        100000,
        "worker processes one tenant's cells may retire per minute (timeouts, kills, crashes; each costs a start)",
    )
    # Structured tables of the file
    api_keys: tuple[ApiKey, ...] = section(
        "api_keys", (), "[[api_keys]]: key, tenant, tools narrowing and approvals, mcp_model_approvals"
    )
    tools: ToolSettings = section(
        "tools", ToolSettings(), "[tools]: plugins, allow, deny, profile, entry_points, approve"
    )
    # Built and checked by McpServerConfig itself (its own messages), not coerced by pydantic.
    mcp_servers: Annotated[tuple[McpServerConfig, ...], SkipValidation] = section(
        "mcp.servers", (), "[mcp.servers.<name>]: one MCP server each"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # A Settings built in code is its arguments and nothing else; only load_settings reads sources.
        return (init_settings,)

    def replace(self, **changes: object) -> Settings:
        """A copy with ``changes`` applied and validated like any other source (the object never changes)."""
        return validated({**dict(self), **changes}, lambda name: f"setting {name}")

    # -- derived ----------------------------------------------------------------------------------

    @property
    def resolved_data_dir(self) -> Path:
        if self.data_dir:
            return Path(self.data_dir).expanduser()
        return Path("~/.local/share/codemode").expanduser()

    @property
    def resolved_store_url(self) -> str:
        return self.store_url or f"sqlite:///{self.resolved_data_dir / 'store.sqlite3'}"

    @property
    def resolved_advertise_url(self) -> str:
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def running_slot_count(self) -> int:
        """``running_slots``, or with 0 one per CPU the service may use (``cpus.py``), at least 2.

        A slot is held only while its guest runs (CPU-bound): more running guests than CPUs only take
        turns, each evicting the others' caches.  Two at least, so one long cell of a tenant never
        leaves its next cell waiting on a one-CPU machine.
        """
        return self.running_slots or max(2, min(usable_cpus(), 256))

    @property
    def worker_cap(self) -> int:
        # Tenants never share a process, so in the worst case every parked cell is its own tenant's.
        return self.max_workers or (2 * self.workers + self.max_parked_cells)

    @property
    def rlimit_as_bytes(self) -> int:
        return self.worker_rlimit_as_bytes or (self.max_memory_limit_bytes + self.worker_max_parked_bytes + 1024 * MiB)

    def check(self) -> Settings:
        """Refuse combinations that cannot work; return self."""
        if self.timeout_ms > self.max_timeout_ms:
            raise ConfigError("timeout_ms is above max_timeout_ms", need_param="timeout_ms")
        if self.memory_limit_bytes > self.max_memory_limit_bytes:
            raise ConfigError("memory_limit_bytes is above max_memory_limit_bytes", need_param="memory_limit_bytes")
        if self.tool_timeout_seconds > self.tool_timeout_cap_seconds:
            raise ConfigError(
                "tool_timeout_seconds is above tool_timeout_cap_seconds", need_param="tool_timeout_seconds"
            )
        for server in self.mcp_servers:
            over = server.clock_over(self.tool_timeout_cap_seconds * 1000)
            if over is not None:
                raise ConfigError(
                    f"mcp.servers.{server.name}: {over} is above tool_timeout_cap_seconds "
                    f"({self.tool_timeout_cap_seconds} s); lower it or raise the cap",
                    need_param=f"mcp.servers.{server.name}",
                )
        if self.advertise_url and not re.match(r"^https?://[^/?#\s]+(/[^?#\s]*)?$", self.advertise_url):
            raise ConfigError(
                f"advertise_url {self.advertise_url!r} is not an http:// or https:// URL (e.g. http://10.0.0.5:8000)",
                need_param="advertise_url",
            )
        if self.redis_sentinels and not self.resolved_store_url.startswith("redis:"):
            raise ConfigError(
                "redis_sentinels is set but store_url is not a redis:// URL; give store_url = "
                '"redis://[:PASSWORD@]MASTER-NAME/DB" (its host is not used: the Sentinels name the primary)',
                need_param="store_url",
            )
        for entry in self.allowed_hosts:
            try:
                parse_allowed_host(entry)
            except ValueError as exc:
                raise ConfigError(str(exc), need_param="allowed_hosts") from None
        if not self.api_keys and not _is_loopback(self.host):
            raise ConfigError(
                f"refusing to bind {self.host!r} without API keys: add [[api_keys]] to the config file "
                "or bind 127.0.0.1",
                need_param="host",
            )
        return self


def _is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


# -- validation ---------------------------------------------------------------------------------


def close_hint(wrong: str, choices: Mapping[str, str]) -> str:
    """``"; did you mean X?"`` for the closest of ``choices`` (compared on its key, shown as its value)."""
    close = difflib.get_close_matches(wrong, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {choices[close[0]]}?" if close else ""


def _allowed(info: FieldInfo) -> str:
    if info.annotation is bool:
        return "true or false"
    if info.annotation is int:
        low = next((m.ge for m in info.metadata if getattr(m, "ge", None) is not None), None)
        high = next((m.le for m in info.metadata if getattr(m, "le", None) is not None), None)
        return f"an integer in {low}..{high}"
    if info.annotation == tuple[str, ...]:
        return "a list of strings (in the environment: comma-separated)"
    if get_origin(info.annotation) is Literal:
        return "one of " + ", ".join(repr(choice) for choice in get_args(info.annotation))
    return "a string" if info.annotation is str else str(info.annotation)


def validated(values: Mapping[str, object], where: Callable[[str], str]) -> Settings:
    """``Settings(**values)``, a refusal naming the key (as ``where`` names it) and what is allowed."""
    try:
        return Settings.model_validate(values)  # the values alone: a Settings reads no source itself
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0])
        info = Settings.model_fields.get(name)
        if info is None:
            raise ConfigError(
                f"unknown setting {name}{close_hint(name, {n: n for n in Settings.model_fields})}", need_param=name
            ) from None
        if len(error["loc"]) == 1:
            raise ConfigError(
                f"{where(name)} = {error['input']!r} is not allowed: it must be {_allowed(info)}", need_param=name
            ) from None
        # Inside a table: name the entry, not its input (it may hold a key or a header secret).
        inner = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"][1:])
        raise ConfigError(f"{where(name)}{inner}: {error['msg']}", need_param=name) from None
