"""Immutable configuration of one MCP server (``[mcp.servers.<name>]``), read by the settings.

It imports nothing of the MCP client (``service/mcp/``), so reading settings loads no MCP code.

``per_tenant = true`` gives every tenant its own connection (a stdio process or an HTTP session), at
most ``max_tenant_connections`` of them at once; one idle for ``tenant_idle_seconds`` is closed.
``per_tenant = false`` makes every tenant share one connection.  Unset, the deployment decides
(``for_deployment``): a stdio server is per tenant when the API keys name several tenants, so one
tenant's call that crashes or wedges the process cannot fail another tenant's call, and tenants never
share a process's memory; an HTTP server is shared, because its remote process is shared anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

from .errors import McpConfigError

Startup = Literal["eager", "lazy"]


def _frozen(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _positive_int(value: object) -> bool:
    """A positive ``int`` (TOML's ``true`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class McpServerConfig:
    """One server: a stdio command or a Streamable HTTP URL, with its secrets and timeout."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    timeout_ms: int = 30000
    startup: Startup = "lazy"
    per_tenant: bool | None = None  # None: decided by the deployment (for_deployment)
    max_tenant_connections: int = 8
    tenant_idle_seconds: int = 300
    # Tools (as the server lists them) that may be sent again after a connection broke mid-call.
    idempotent_tools: tuple[str, ...] = ()
    # Wall clocks of single tools (as the server lists them), in ms; the others run on ``timeout_ms``.
    tool_timeouts_ms: Mapping[str, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # Copies behind read-only views: a caller mutating its dict cannot change a running server.
        for label in ("args", "idempotent_tools"):
            value = getattr(self, label)
            # A lone string stays one, so validate() refuses it instead of splitting it into characters.
            object.__setattr__(self, label, tuple(value) if isinstance(value, list | tuple) else value)
        object.__setattr__(self, "env", _frozen(self.env))
        object.__setattr__(self, "headers", _frozen(self.headers))
        if isinstance(self.tool_timeouts_ms, Mapping):
            object.__setattr__(self, "tool_timeouts_ms", MappingProxyType(dict(self.tool_timeouts_ms)))

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def validate(self) -> McpServerConfig:
        """Raise ``McpConfigError`` naming the server when the entry is unusable; return self.

        The checks run in a fixed order (transport, its fields, clocks, tenancy); the first problem is told.
        """
        if not isinstance(self.name, str) or not self.name:
            raise McpConfigError("MCP server entry needs a non-empty name")
        for check in (self._transport_problem, self._field_problem, self._clock_problem, self._tenancy_problem):
            problem = check()
            if problem is not None:
                raise McpConfigError(f"MCP server '{self.name}'{problem}", server=self.name)
        return self

    def _transport_problem(self) -> str | None:
        if (self.command is None) == (self.url is None):
            return " needs exactly one of 'command' (stdio) or 'url' (HTTP)"
        if self.command is not None and (not isinstance(self.command, str) or not self.command):
            return ": 'command' must be a non-empty string"
        if self.url is not None and (not isinstance(self.url, str) or not self.url.startswith(("http://", "https://"))):
            return ": 'url' must be an http:// or https:// URL"
        return None

    def _field_problem(self) -> str | None:
        for label in ("args", "idempotent_tools"):
            value = getattr(self, label)
            if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
                return f": '{label}' must be a list of strings"
        for label, table in (("env", self.env), ("headers", self.headers)):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
                return f": '{label}' must map strings to strings"
        if self.url is not None and (self.env or self.cwd is not None or self.args):
            return ": 'args', 'env' and 'cwd' apply to stdio servers only"
        if self.command is not None and self.headers:
            return ": 'headers' apply to HTTP servers only"
        return None

    def _clock_problem(self) -> str | None:
        if not _positive_int(self.timeout_ms):
            return ": 'timeout_ms' must be a positive integer"
        if not isinstance(self.tool_timeouts_ms, Mapping) or not all(
            isinstance(k, str) and _positive_int(v) for k, v in self.tool_timeouts_ms.items()
        ):
            return ": 'tool_timeouts_ms' must map tool names to positive integers (milliseconds)"
        if self.startup not in ("eager", "lazy"):
            return ': \'startup\' must be "eager" or "lazy"'
        return None

    def _tenancy_problem(self) -> str | None:
        if "/" in self.name:
            # Policy entries read `mcp:<server>/<tool>`; a slash in the name would be ambiguous.
            return ": a server name cannot contain '/'"
        if self.per_tenant is not None and not isinstance(self.per_tenant, bool):
            return ": 'per_tenant' must be true or false"
        for label in ("max_tenant_connections", "tenant_idle_seconds"):
            if not _positive_int(getattr(self, label)):
                return f": '{label}' must be a positive integer"
        if self.per_tenant and self.startup == "eager":
            return ": 'per_tenant' servers start per tenant on first use; drop startup = \"eager\""
        return None

    def tool_timeout_ms(self, tool_name: str) -> int:
        """The wall clock of one call of ``tool_name``: its own entry in ``tool_timeouts_ms``, else ``timeout_ms``."""
        return self.tool_timeouts_ms.get(tool_name, self.timeout_ms)

    def clock_over(self, cap_ms: int) -> str | None:
        """The first of this server's clocks above ``cap_ms`` (as the config spells it), or None."""
        if self.timeout_ms > cap_ms:
            return f"timeout_ms = {self.timeout_ms}"
        for tool, ms in self.tool_timeouts_ms.items():
            if ms > cap_ms:
                return f"tool_timeouts_ms.{tool} = {ms}"
        return None

    def for_deployment(self, tenants: int) -> McpServerConfig:
        """This config with ``per_tenant`` decided for a deployment serving ``tenants`` tenants."""
        if self.per_tenant is not None:
            return self
        isolate = self.transport == "stdio" and tenants > 1
        if isolate and self.startup == "eager":
            raise McpConfigError(
                f"MCP server '{self.name}': with several tenants a stdio server runs one process per tenant "
                '(per_tenant defaults to true), started on first use; drop startup = "eager", or set '
                "per_tenant = false to share one process between every tenant",
                server=self.name,
            )
        return replace(self, per_tenant=isolate)
