"""What an exec request fixes for a cell's life (spec, limits) and what the cell counts (telemetry)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.tools.catalog import ToolEntry
    from service.tools.policy import ToolPolicy

from bridge.messages import Language


class CellStatus(enum.Enum):
    RUNNING = "running"  # a leg is in progress
    WAITING = "waiting"  # parked between legs
    COMPLETED = "completed"
    FAILED = "failed"


class EndReason(enum.Enum):
    """Why a cell ended (beside its envelope): on its own, or ended by the host."""

    FINISHED = "finished"  # completed or failed while running
    CANCELLED = "cancelled"  # its caller cancelled it, or the service shut down
    EXPIRED = "expired"  # parked longer than cell_ttl_seconds


@dataclass(frozen=True)
class CellLimits:
    """Effective limits of one cell (request values within the server's caps)."""

    timeout_ms: int
    memory_limit_bytes: int
    max_output_bytes: int
    max_snapshot_bytes: int
    kill_grace_ms: int
    max_pending_requests: int
    max_request_bytes: int
    max_request_values: int = 1_000_000

    @property
    def inbox_bytes(self) -> int:
        return min(self.memory_limit_bytes, self.max_snapshot_bytes)


@dataclass(frozen=True)
class CellSpec:
    """Everything an exec request fixes for the cell's whole life."""

    code: str
    tenant: str
    limits: CellLimits
    title: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    restart_safe: bool = False
    headless: bool = False
    background: bool = False  # runs leg after leg on its own after exec answered "running"
    client_tools: tuple[ToolEntry, ...] = ()  # compiled once per exec
    tool_policy: ToolPolicy | None = None  # the API key's tool narrowing
    require_approval: tuple[str, ...] = ()  # the exec's approval entries (service.tools.approvals)
    language: Language = "javascript"  # "python": the cell runs on Monty


@dataclass
class Telemetry:
    guest_cpu_ms: float = 0.0
    call_count: int = 0
    search_count: int = 0
    describe_count: int = 0
    retries: int = 0  # transient failures of idempotent tools the host retried
    host_requests: int = 0
    legs: int = 0
    heap_bytes: int = 0

    def public(self, wall_ms: float, tool_wait_ms: float = 0.0, tool_wait_total_ms: float = 0.0) -> dict[str, Any]:
        """The envelope's ``telemetry`` object; ``wall_ms`` and ``tool_wait_ms`` are the current
        exec/wait call's, ``tool_wait_total_ms`` the cell's so far (service.cells.wait_clock)."""
        return {
            "wall_ms": round(wall_ms, 3),
            "guest_cpu_ms": self.guest_cpu_ms,
            "tool_wait_ms": round(tool_wait_ms, 3),
            "tool_wait_total_ms": round(tool_wait_total_ms, 3),
            "call_count": self.call_count,
            "search_count": self.search_count,
            "describe_count": self.describe_count,
            "retries": self.retries,
            "host_requests": self.host_requests,
            "legs": self.legs,
            "heap_bytes": self.heap_bytes,
        }
