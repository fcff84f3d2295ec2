"""One immutable settings object, read once at start and passed down.

Precedence: CLI flag > environment (``CODEMODE_<NAME>``) > TOML config file > default.  Every
scalar setting has one entry in ``SCALARS``: its TOML section, type, default and range.  Unknown
keys and bad values raise ``ConfigError`` naming the key, so a typo stops the service at start
instead of being ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError

MiB = 1024 * 1024


@dataclass(frozen=True)
class Scalar:
    section: str  # "" for top level, else the TOML table
    kind: type
    default: Any
    low: int | None = None
    high: int | None = None
    doc: str = ""


SCALARS: dict[str, Scalar] = {
    # [server]
    "host": Scalar("server", str, "127.0.0.1", doc="bind address"),
    "port": Scalar("server", int, 8000, 0, 65535, "bind port"),
    "data_dir": Scalar("server", str, "", doc="directory for the default SQLite store (default ~/.local/share/codemode)"),
    "store_url": Scalar("server", str, "", doc="sqlite:///PATH or redis://HOST:PORT/DB"),
    "log_level": Scalar("server", str, "info", doc="uvicorn log level"),
    # Connection hygiene of `codemode serve` (a peer that trickles bytes must not hold a socket forever).
    "header_read_timeout_seconds": Scalar("server", int, 10, 1, 3600,
                                          "close a connection whose request headers take longer"),
    "body_read_timeout_seconds": Scalar("server", int, 60, 1, 3600,
                                        "close a connection whose request body takes longer after its headers"),
    "keep_alive_timeout_seconds": Scalar("server", int, 5, 1, 3600, "close an idle keep-alive connection"),
    "max_connections": Scalar("server", int, 1000, 1, 1_000_000,
                              "open connections of `codemode serve`; further ones are closed at once"),
    "metrics_require_key": Scalar("server", bool, False, doc="GET /metrics needs a valid API key"),
    # [limits]: request defaults and the server's caps
    "timeout_ms": Scalar("limits", int, 10000, 100, 60000, "default wall clock per exec/wait call"),
    "max_timeout_ms": Scalar("limits", int, 60000, 100, 60000, "largest timeout_ms a request may ask"),
    "memory_limit_bytes": Scalar("limits", int, 64 * MiB, MiB, 1024 * MiB, "default guest heap cap"),
    "max_memory_limit_bytes": Scalar("limits", int, 1024 * MiB, MiB, 1024 * MiB, "largest memory_limit_bytes"),
    "max_output_bytes": Scalar("limits", int, 65536, 1024, 10 * MiB, "default output budget"),
    "max_snapshot_bytes": Scalar("limits", int, 10 * MiB, 1024, 256 * MiB, "heap cap for parking; inbox cap"),
    "max_parked_cells": Scalar("limits", int, 64, 1, 4096, "parked cells per process"),
    "cell_ttl_seconds": Scalar("limits", int, 900, 1, 86400, "idle time before a parked cell expires"),
    "results_ttl_seconds": Scalar("limits", int, 3600, 1, 86400, "lifetime of saved results"),
    "max_calls_per_cell": Scalar("limits", int, 200, 1, 100000, "tool calls one cell may make"),
    "max_searches_per_cell": Scalar("limits", int, 200, 1, 100000, "catalog.search calls one cell may make"),
    "max_pending_requests": Scalar("limits", int, 128, 1, 4096, "host requests one cell may have in flight"),
    "search_default_limit": Scalar("limits", int, 8, 1, 50, "catalog.search default limit"),
    "max_search_limit": Scalar("limits", int, 50, 1, 50, "catalog.search largest limit"),
    "max_request_bytes": Scalar("limits", int, 8 * MiB, 1024, 256 * MiB, "JSON arguments of one guest request"),
    "max_exec_body_bytes": Scalar("limits", int, 2 * MiB, 1024, 64 * MiB, "exec request body cap"),
    # [workers]
    "workers": Scalar("workers", int, 4, 1, 256, "warm worker processes for running cells"),
    "max_workers": Scalar("workers", int, 0, 0, 4096, "hard cap on worker processes (0: workers + max_parked_cells)"),
    "worker_max_cells": Scalar("workers", int, 2000, 1, 1_000_000, "cells a worker runs before it is recycled"),
    "kill_grace_ms": Scalar("workers", int, 1000, 50, 60000, "SIGKILL a worker this long past its deadline"),
    "acquire_timeout_ms": Scalar("workers", int, 5000, 10, 120000, "wait for a free worker before 503"),
    "tenant_max_concurrency": Scalar("workers", int, 32, 1, 100000, "running exec/wait calls per tenant"),
    # [tenants]: per-tenant quotas, so one tenant cannot take what another needs
    "tenant_max_parked_cells": Scalar("tenants", int, 16, 1, 4096, "parked cells per tenant (within max_parked_cells)"),
    "tenant_max_waits": Scalar("tenants", int, 16, 1, 100000, "concurrent wait calls per tenant"),
    "tenant_results_bytes": Scalar("tenants", int, 64 * MiB, 1024, 1 << 40, "saved-result bytes per tenant"),
    "results_max_bytes": Scalar("tenants", int, 512 * MiB, 1024, 1 << 40, "saved-result bytes of all tenants"),
    "tenant_store_bytes": Scalar("tenants", int, 32 * MiB, 1024, 1 << 40, "session-store bytes per tenant"),
    "tenant_max_sessions": Scalar("tenants", int, 1000, 1, 10_000_000, "sessions with stored data per tenant"),
    "session_ttl_seconds": Scalar("tenants", int, 7 * 86400, 60, 10 * 365 * 86400,
                                  "a session's stored data is removed this long after its last write"),
    "tenant_finished_kept": Scalar("tenants", int, 1000, 1, 1_000_000, "finished-cell summaries kept per tenant"),
    "max_tenants_tracked": Scalar("tenants", int, 10000, 1, 1_000_000,
                                  "tenants whose finished-cell summaries are kept (least recent dropped)"),
    "worker_rlimit_as_bytes": Scalar("workers", int, 0, 0, 1 << 44, "RLIMIT_AS of workers (0: max memory + 1 GiB)"),
    "worker_cpu_seconds": Scalar("workers", int, 3600, 1, 1 << 30,
                                 "RLIMIT_CPU of a worker; it is replaced after using 80% of it"),
}

ENV_PREFIX = "CODEMODE_"


@dataclass(frozen=True)
class ApiKey:
    key: str
    tenant: str
    tools: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolSettings:
    plugins: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    profile: str | None = None
    entry_points: bool = True


def _default(name: str) -> Any:
    return SCALARS[name].default


@dataclass(frozen=True)
class Settings:
    """Every setting; scalar defaults come from ``SCALARS`` (one place for names, defaults, ranges)."""

    host: str = _default("host")
    port: int = _default("port")
    data_dir: str = _default("data_dir")
    store_url: str = _default("store_url")
    log_level: str = _default("log_level")
    header_read_timeout_seconds: int = _default("header_read_timeout_seconds")
    body_read_timeout_seconds: int = _default("body_read_timeout_seconds")
    keep_alive_timeout_seconds: int = _default("keep_alive_timeout_seconds")
    max_connections: int = _default("max_connections")
    metrics_require_key: bool = _default("metrics_require_key")
    timeout_ms: int = _default("timeout_ms")
    max_timeout_ms: int = _default("max_timeout_ms")
    memory_limit_bytes: int = _default("memory_limit_bytes")
    max_memory_limit_bytes: int = _default("max_memory_limit_bytes")
    max_output_bytes: int = _default("max_output_bytes")
    max_snapshot_bytes: int = _default("max_snapshot_bytes")
    max_parked_cells: int = _default("max_parked_cells")
    cell_ttl_seconds: int = _default("cell_ttl_seconds")
    results_ttl_seconds: int = _default("results_ttl_seconds")
    max_calls_per_cell: int = _default("max_calls_per_cell")
    max_searches_per_cell: int = _default("max_searches_per_cell")
    max_pending_requests: int = _default("max_pending_requests")
    search_default_limit: int = _default("search_default_limit")
    max_search_limit: int = _default("max_search_limit")
    max_request_bytes: int = _default("max_request_bytes")
    max_exec_body_bytes: int = _default("max_exec_body_bytes")
    workers: int = _default("workers")
    max_workers: int = _default("max_workers")
    worker_max_cells: int = _default("worker_max_cells")
    kill_grace_ms: int = _default("kill_grace_ms")
    acquire_timeout_ms: int = _default("acquire_timeout_ms")
    tenant_max_concurrency: int = _default("tenant_max_concurrency")
    tenant_max_parked_cells: int = _default("tenant_max_parked_cells")
    tenant_max_waits: int = _default("tenant_max_waits")
    tenant_results_bytes: int = _default("tenant_results_bytes")
    results_max_bytes: int = _default("results_max_bytes")
    tenant_store_bytes: int = _default("tenant_store_bytes")
    tenant_max_sessions: int = _default("tenant_max_sessions")
    session_ttl_seconds: int = _default("session_ttl_seconds")
    tenant_finished_kept: int = _default("tenant_finished_kept")
    max_tenants_tracked: int = _default("max_tenants_tracked")
    worker_rlimit_as_bytes: int = _default("worker_rlimit_as_bytes")
    worker_cpu_seconds: int = _default("worker_cpu_seconds")
    api_keys: tuple[ApiKey, ...] = ()
    tools: ToolSettings = ToolSettings()
    mcp_servers: tuple[Any, ...] = ()  # service.mcp.config.McpServerConfig

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
    def worker_cap(self) -> int:
        return self.max_workers or (self.workers + self.max_parked_cells)

    @property
    def rlimit_as_bytes(self) -> int:
        return self.worker_rlimit_as_bytes or (self.max_memory_limit_bytes + 1024 * MiB)

    def check(self) -> Settings:
        """Refuse combinations that cannot work; return self."""
        if self.timeout_ms > self.max_timeout_ms:
            raise ConfigError("timeout_ms is above max_timeout_ms", need_param="timeout_ms")
        if self.memory_limit_bytes > self.max_memory_limit_bytes:
            raise ConfigError("memory_limit_bytes is above max_memory_limit_bytes", need_param="memory_limit_bytes")
        if not self.api_keys and not _is_loopback(self.host):
            raise ConfigError(
                f"refusing to bind {self.host!r} without API keys: add [[api_keys]] to the config file "
                "or bind 127.0.0.1",
                need_param="host",
            )
        return self


def _is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def _coerce(name: str, spec: Scalar, raw: Any, origin: str) -> Any:
    try:
        if spec.kind is int:
            if isinstance(raw, bool):
                raise ValueError("a boolean is not an integer")
            value: Any = int(raw)
            if isinstance(raw, float) and raw != value:
                raise ValueError("not an integer")
        elif spec.kind is bool:
            value = _boolean(raw)
        else:
            if not isinstance(raw, str):
                raise ValueError("expected a string")
            value = raw
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{origin} {name}: {exc} (got {raw!r})", need_param=name) from None
    if spec.kind is int:
        if spec.low is not None and value < spec.low or spec.high is not None and value > spec.high:
            raise ConfigError(f"{origin} {name}={value} is outside {spec.low}..{spec.high}", need_param=name)
    return value


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    raise ValueError("expected true or false")


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"config {where} must be a list of strings", need_param=where)
    return tuple(value)


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist", need_param="config") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}", need_param="config") from None


def _from_file(data: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    known_sections = {s.section for s in SCALARS.values()} | {"api_keys", "tools", "mcp"}
    for key in data:
        if key not in known_sections:
            raise ConfigError(f"unknown config key {key!r}; known: {sorted(known_sections)}", need_param=key)
    for section in {s.section for s in SCALARS.values()}:
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"config [{section}] must be a table", need_param=section)
        for key, raw in table.items():
            spec = SCALARS.get(key)
            if spec is None or spec.section != section:
                raise ConfigError(f"unknown config key {section}.{key}", need_param=f"{section}.{key}")
            values[key] = _coerce(key, spec, raw, "config")
    keys = []
    for i, entry in enumerate(data.get("api_keys", [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not entry.get("key"):
            raise ConfigError(f"config api_keys[{i}] needs a non-empty string key", need_param="api_keys")
        extra = set(entry) - {"key", "tenant", "tools"}
        if extra:
            raise ConfigError(f"unknown config key api_keys[{i}].{sorted(extra)[0]}", need_param="api_keys")
        tenant = entry.get("tenant", "default")
        if not isinstance(tenant, str) or not tenant:
            raise ConfigError(f"config api_keys[{i}].tenant must be a non-empty string", need_param="api_keys")
        tools = entry.get("tools", {})
        if not isinstance(tools, dict):
            raise ConfigError(f"config api_keys[{i}].tools must be a table", need_param="api_keys")
        keys.append(ApiKey(entry["key"], tenant, tools))
    if keys:
        values["api_keys"] = tuple(keys)
    if "tools" in data:
        t = data["tools"]
        extra = set(t) - {"plugins", "allow", "deny", "profile", "entry_points"}
        if extra:
            raise ConfigError(f"unknown config key tools.{sorted(extra)[0]}", need_param="tools")
        profile = t.get("profile")
        if profile is not None and not isinstance(profile, str):
            raise ConfigError("config tools.profile must be a string", need_param="tools.profile")
        values["tools"] = ToolSettings(
            plugins=_string_list(t.get("plugins", []), "tools.plugins"),
            allow=_string_list(t.get("allow", []), "tools.allow"),
            deny=_string_list(t.get("deny", []), "tools.deny"),
            profile=profile,
            entry_points=bool(t.get("entry_points", True)),
        )
    if "mcp" in data:
        values["mcp_servers"] = _mcp_servers(data["mcp"])
    return values


def _mcp_servers(table: Any) -> tuple[Any, ...]:
    from .mcp.config import McpServerConfig

    if not isinstance(table, dict) or set(table) - {"servers"}:
        raise ConfigError("config [mcp] may only hold [mcp.servers.<name>] tables", need_param="mcp")
    servers = []
    for name, entry in table.get("servers", {}).items():
        where = f"mcp.servers.{name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"config {where} must be a table", need_param=where)
        allowed = {"command", "args", "env", "cwd", "url", "headers", "timeout_ms", "startup", "per_tenant",
                   "max_tenant_connections", "tenant_idle_seconds"}
        extra = set(entry) - allowed
        if extra:
            raise ConfigError(f"unknown config key {where}.{sorted(extra)[0]}", need_param=where)
        try:
            cfg = McpServerConfig(
                name=name,
                command=entry.get("command"),
                args=tuple(_string_list(entry.get("args", []), f"{where}.args")),
                env=dict(entry.get("env", {})),
                cwd=entry.get("cwd"),
                url=entry.get("url"),
                headers=dict(entry.get("headers", {})),
                timeout_ms=int(entry.get("timeout_ms", 30000)),
                startup=entry.get("startup", "lazy"),
                **{k: entry[k] for k in ("per_tenant", "max_tenant_connections", "tenant_idle_seconds")
                   if k in entry},
            )
            cfg.validate()
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the MCP config type raises its own error kinds
            raise ConfigError(f"config {where}: {exc}", need_param=where) from None
        servers.append(cfg)
    return tuple(servers)


def load_settings(
    *,
    environ: Mapping[str, str] | None = None,
    config_path: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: defaults < config file < environment < ``overrides`` (CLI flags)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_path or env.get(ENV_PREFIX + "CONFIG")
    if path:
        values.update(_from_file(_read_file(path)))
    known_env = {ENV_PREFIX + name.upper() for name in SCALARS} | {ENV_PREFIX + "CONFIG"}
    for key, raw in env.items():
        if key.startswith(ENV_PREFIX) and key not in known_env:
            raise ConfigError(f"unknown environment variable {key}", need_param=key)
    for name, spec in SCALARS.items():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _coerce(name, spec, raw, "environment variable " + ENV_PREFIX + name.upper())
    for name, raw in (overrides or {}).items():
        if raw is None:
            continue
        spec = SCALARS.get(name)
        values[name] = _coerce(name, spec, raw, "flag") if spec else raw
    names = {f.name for f in fields(Settings)}
    return replace(Settings(), **{k: v for k, v in values.items() if k in names}).check()
