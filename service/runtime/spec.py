"""What an exec request fixes for a cell's life (spec, limits) and what the cell counts (telemetry)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict

from bridge.messages import Language
from guest_runtime.guest_config import MAX_REQUEST_VALUES
from service.errors import InvalidRequest

if TYPE_CHECKING:
    from service.settings import Settings
    from service.tools.catalog import ToolEntry
    from service.tools.policy import ToolPolicy

    from .call_log import CallEntry


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


def check_runs(settings: Settings, language: Language) -> None:
    """Refuse a cell language this server does not run (InvalidRequest naming ``language``): Python cells when
    ``python_cells`` is off (its workers never load Monty)."""
    if language == "python" and not settings.python_cells:
        raise InvalidRequest(
            "this server runs no Python cells (python_cells = false): write the cell in JavaScript, or ask "
            "the operator to set python_cells = true",
            need_param="language",
        )


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
    max_request_values: int = MAX_REQUEST_VALUES

    @property
    def inbox_bytes(self) -> int:
        return min(self.memory_limit_bytes, self.max_snapshot_bytes)


def limits_from(
    s: Settings, timeout_ms: int | None, memory_limit_bytes: int | None, max_output_bytes: int | None
) -> CellLimits:
    """A cell's limits: the request's values (checked against the server's caps), else the defaults."""
    timeout = s.timeout_ms if timeout_ms is None else timeout_ms
    memory = s.memory_limit_bytes if memory_limit_bytes is None else memory_limit_bytes
    output = s.max_output_bytes if max_output_bytes is None else max_output_bytes
    check_range("timeout_ms", timeout, 100, s.max_timeout_ms)
    check_range("memory_limit_bytes", memory, 1024 * 1024, s.max_memory_limit_bytes)
    check_range("max_output_bytes", output, 1024, 10 * 1024 * 1024)
    return CellLimits(
        timeout_ms=timeout,
        memory_limit_bytes=memory,
        max_output_bytes=output,
        max_snapshot_bytes=s.max_snapshot_bytes,
        kill_grace_ms=s.kill_grace_ms,
        max_pending_requests=s.max_pending_requests,
        max_request_bytes=s.max_request_bytes,
        max_request_values=s.max_request_values,
    )


def check_range(name: str, value: int, low: int, high: int) -> None:
    if not (low <= value <= high):
        raise InvalidRequest(f"{name} must be between {low} and {high} (got {value})", need_param=name)


#: A spec's principal when none is given: its tenant's (``worker_isolation = "tenant"``).
TENANT_WIDE: str = "\x00the tenant's"


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
    call_log: bool = False  # envelopes list the host requests settled (service.runtime.call_log)
    client_tools: tuple[ToolEntry, ...] = ()  # compiled once per exec
    tool_policy: ToolPolicy | None = None  # the API key's tool narrowing
    require_approval: tuple[str, ...] = ()  # the exec's approval entries (service.tools.approvals)
    language: Language = "javascript"  # "python": the cell runs on Monty
    # Who the cell's worker process serves (service.principals; None: a process of its own, for this
    # cell alone).  Every face builds its spec with ``service.api.exec.cell_spec``, which sets it from
    # the key and ``worker_isolation``; a spec built without one (tests, benchmarks) is the tenant's.
    principal: str | None = TENANT_WIDE

    def __post_init__(self) -> None:
        if self.principal is TENANT_WIDE:
            object.__setattr__(self, "principal", self.tenant)


class TelemetryFields(TypedDict):
    """An envelope's ``telemetry`` object (``CellTelemetry`` in service.api.schemas)."""

    wall_ms: float
    cell_wall_ms: float
    guest_cpu_ms: float
    tool_wait_ms: float
    tool_wait_total_ms: float
    call_count: int
    search_count: int
    describe_count: int
    retries: int
    host_requests: int
    legs: int
    heap_bytes: int
    call_log: NotRequired[list[CallEntry]]
    call_log_dropped: NotRequired[int]


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

    def public(
        self,
        wall_ms: float,
        tool_wait_ms: float = 0.0,
        tool_wait_total_ms: float = 0.0,
        *,
        cell_wall_ms: float | None = None,
        call_log: tuple[list[CallEntry], int] | None = None,
    ) -> TelemetryFields:
        """The envelope's ``telemetry`` object; ``wall_ms`` and ``tool_wait_ms`` are the current
        exec/wait call's, ``tool_wait_total_ms`` and ``cell_wall_ms`` the cell's so far (service.runtime.clocks;
        ``cell_wall_ms`` is ``wall_ms`` when not given: a cell of one call); ``call_log``: the entries and
        the count left out that the envelope shows (service.runtime.call_log), when the exec asked for them."""
        fields: TelemetryFields = {
            "wall_ms": round(wall_ms, 3),
            "cell_wall_ms": round(wall_ms if cell_wall_ms is None else cell_wall_ms, 3),
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
        if call_log is not None:
            fields["call_log"], dropped = call_log
            if dropped:
                fields["call_log_dropped"] = dropped
        return fields
