"""Wire models of the API (requests, envelopes, errors), with OpenAPI examples: HTTP, the MCP facade and the CLI share them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from bridge.messages import Language
from service.tools.approvals import MAX_REASON_CHARS, MAX_REQUEST_ENTRIES

SESSION_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
#: Client tool results one wait body may carry: as many as a cell may have calls pending (the most
#: ``max_pending_requests`` allows), so an honest body never comes near it.
MAX_TOOL_RESULTS = 4096
# Cell ids are opaque; in paths they are held to the same characters as session ids.
ID_PATTERN = SESSION_PATTERN
#: The languages a request may name. "typescript" is "javascript" by another name: a JavaScript cell
#: accepts TypeScript syntax, its types blanked in place before it runs (guest_runtime/quickjs/typescript.py).
RequestLanguage = Literal["javascript", "typescript", "python"]
REQUEST_LANGUAGES: tuple[RequestLanguage, ...] = ("javascript", "typescript", "python")


def cell_language(language: RequestLanguage) -> Language:
    """The language a cell of ``language`` runs in."""
    return "python" if language == "python" else "javascript"


class ClientToolDecl(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=128)
    description: str | None = Field(default=None, max_length=4096)
    input_schema: dict[str, object] | None = None


class ExecRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"code": 'text("hi"); return 1 + 1', "title": "smoke test"}]},
    )
    code: str = Field(
        max_length=1024 * 1024,
        description="JavaScript or TypeScript: the body of an async function; Python (language python): a module "
        "whose last expression statement is the cell's value.",
    )
    title: str | None = Field(default=None, max_length=120)
    session_id: str | None = Field(default=None, pattern=SESSION_PATTERN)
    run_id: str | None = Field(default=None, pattern=SESSION_PATTERN)
    timeout_ms: int | None = None
    memory_limit_bytes: int | None = None
    max_output_bytes: int | None = None
    client_tools: list[ClientToolDecl] = Field(default_factory=list, max_length=128)
    restart_safe: StrictBool = False
    headless: StrictBool = False
    require_approval: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list,
        max_length=MAX_REQUEST_ENTRIES,
        description="tool names, tool ids, plugin ids, mcp:<server> or mcp:<server>/<tool> whose calls in this "
        "cell wait for approval (added to the server's and the key's)",
    )
    language: RequestLanguage = Field(
        default="javascript",
        description="the cell's language: javascript (QuickJS; TypeScript syntax is accepted, its types "
        "stripped), typescript (the same) or python (Monty)",
    )
    background: StrictBool = Field(
        default=False, description="answer `running` at once; the cell runs on its own (see /v1/cells/{id}/events)"
    )
    call_log: StrictBool = Field(
        default=False,
        description="list each host request the cell makes in its envelopes' telemetry.call_log (method, target, "
        "bytes each way, duration, outcome): every exec/wait answer the requests settled since the last one "
        "(a background cell: all of them, in its final envelope); at most 256 kept at once, the rest counted "
        "in telemetry.call_log_dropped",
    )

    @field_validator("code")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("code must be a non-blank string of source code")
        return v


class ToolResultIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(max_length=64, description='the id of a pending entry with method "tool"')
    ok: StrictBool
    value: object = None
    error: object = None


class ApprovalIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(max_length=64, description='the id of a pending entry with method "approval"')
    approve: StrictBool
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS, description="shown to the guest when denied")


class WaitRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"timeout_ms": 10000},
                {"tool_results": [{"id": "req_1", "ok": True, "value": {"temp": 21}}]},
                {"approvals": [{"id": "req_2", "approve": False, "reason": "not today"}]},
            ]
        },
    )
    timeout_ms: int | None = None
    tool_results: list[ToolResultIn] = Field(default_factory=list, max_length=MAX_TOOL_RESULTS)
    approvals: list[ApprovalIn] = Field(default_factory=list, max_length=4096)
    session_id: str | None = Field(default=None, pattern=SESSION_PATTERN)

    @field_validator("tool_results", mode="before")
    @classmethod
    def _few_tool_results(cls, v: object) -> object:
        # Counted before the entries are validated: `max_length` alone is checked only after the
        # items, so 40,000 entries would each be validated (~150 ms of the event loop) first.
        if isinstance(v, list) and len(v) > MAX_TOOL_RESULTS:
            raise ValueError(
                f"{len(v)} entries, over the cap of {MAX_TOOL_RESULTS} per wait; "
                "answer only the cell's pending client tool calls (pending_tool_calls)"
            )
        return v


class TextOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]
    text: str


class JsonOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["json"]
    value: object


class TruncatedOutput(BaseModel):
    """Stands for undelivered output over the cell's max_output_bytes: a prefix of its JSON."""

    model_config = ConfigDict(extra="forbid")
    truncated: Literal[True]
    prefix: str
    omittedBytes: int
    guidance: str


class PendingCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    method: str = Field(
        description='"tool" (a client tool: answer with tool_results), "approval" (answer with '
        'approvals), "yield", or the host work still running'
    )
    tool: str | None = Field(
        default=None, description="tool and MCP calls, approvals: the callable name the guest called"
    )
    name: str | None = Field(default=None, description="client tools: the tool's name as declared in client_tools")
    input: object = Field(default=None, description="client tools and approvals: the call's input")
    reason: str | None = Field(default=None, description="approvals: why the call needs approval")


class CallLogEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="the request's id, as pending_tool_calls names it (req_N)")
    method: str = Field(description="tool, mcp, sleep, search, store.get, ...: what the guest asked for")
    target: str | None = Field(description="the tool or MCP tool it called, for calls")
    request_bytes: int = Field(description="bytes of its encoded arguments")
    reply_bytes: int | None = Field(description="bytes of its reply; null when it ended without one")
    ms: float = Field(description="from its dispatch to its reply")
    outcome: str = Field(description="ok, the error's code, or dropped (the guest stopped waiting for it)")


class CellTelemetry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wall_ms: float = Field(description="this exec/wait call's wall time in the service")
    cell_wall_ms: float = Field(
        description="the cell's wall time since its exec, parked time and time between calls included (a "
        "background cell's run time)"
    )
    guest_cpu_ms: float
    tool_wait_ms: float = Field(
        description="this exec/wait call's time with at least one host request in flight (timers and "
        "requests waiting for the API caller excluded); at most wall_ms"
    )
    tool_wait_total_ms: float = Field(
        description="tool_wait_ms summed over the cell's life so far, parked time included"
    )
    call_count: int
    search_count: int
    describe_count: int
    host_requests: int
    legs: int
    heap_bytes: int
    retries: int = Field(description="transient failures of idempotent tools that the host retried")
    call_log: list[CallLogEntry] | None = Field(
        default=None, description="with exec call_log: the host requests settled since the last envelope"
    )
    call_log_dropped: int | None = Field(
        default=None, description="with exec call_log: requests settled but left out of call_log (over 256 kept)"
    )


class CellEnvelope(BaseModel):
    """The answer for every cell outcome (HTTP 200), built by service.runtime.envelopes."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "status": "completed",
                    "cell_id": "cell_7b0c6f2e-3f57-4a53-9a4e-1f1d0c8b9a10",
                    "value": 2,
                    "output": [{"type": "text", "text": "hi"}],
                    "bridge_dispatch_started": False,
                    "replay_safe": True,
                    "telemetry": {
                        "wall_ms": 1.2,
                        "cell_wall_ms": 1.2,
                        "guest_cpu_ms": 0.4,
                        "tool_wait_ms": 0.0,
                        "tool_wait_total_ms": 0.0,
                        "call_count": 0,
                        "search_count": 0,
                        "describe_count": 0,
                        "host_requests": 0,
                        "legs": 1,
                        "heap_bytes": 262144,
                        "retries": 0,
                    },
                }
            ]
        },
    )
    # "running" only from GET /v1/cells/{id} while a leg is in progress.
    status: Literal["completed", "waiting", "failed", "running"]
    cell_id: str
    value: object = Field(default=None, description="completed only")
    output: list[TextOutput | JsonOutput | TruncatedOutput] = Field(
        default_factory=list, description="entries not delivered before; absent from GET /v1/cells/{id}"
    )
    warnings: list[str] | None = None
    reason: Literal["pending_tools", "yield"] | None = Field(default=None, description="waiting only")
    pending_tool_calls: list[PendingCall] | None = Field(default=None, description="waiting only")
    error: str | None = Field(default=None, description="failed only")
    code: str | None = Field(
        default=None,
        description="failed only: invalid_input, uncaught_error (the cell's own code threw, or a host call's "
        "rejection went uncaught), stalled, request_limit_exceeded, timeout, memory_limit_exceeded, "
        "snapshot_limit_exceeded, output_limit_exceeded, aborted, runtime_unavailable, internal_error (a fault "
        "of the service)",
    )
    failure_phase: Literal["input", "guest", "bridge", "host"] | None = Field(default=None, description="failed only")
    untrusted_content: bool | None = Field(
        default=None, description="present (true) once the cell has seen network-derived data"
    )
    bridge_dispatch_started: bool
    replay_safe: bool
    telemetry: CellTelemetry


class ErrorDetail(BaseModel):
    code: str
    message: str
    error_type: Literal["recoverable", "config", "transient"]
    need_param: str | None = None
    non_retriable: bool | None = None


class ErrorBody(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": {
                        "code": "cell_not_found",
                        "message": "cell is unavailable or expired",
                        "error_type": "recoverable",
                    }
                }
            ]
        }
    )
    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in {
        401: "missing or unknown API key",
        403: "not allowed for this key",
        404: "unknown or expired",
        409: "another wait runs",
        413: "body too large",
        421: "no API keys configured, and Host or Origin names no allowed host (allowed_hosts)",
        422: "invalid field (need_param names it)",
        429: "tenant or parked-cell cap (Retry-After)",
        503: "no capacity or store down (Retry-After)",
    }.items()
}


# ---- answers of the routes that are not cell envelopes -----------------------------------------------


class ToolHandle(BaseModel):
    """One tool as ``catalog.all()`` shows it in a guest."""

    model_config = ConfigDict(extra="forbid")
    callableName: str = Field(description="the global a cell calls")
    toolName: str = Field(description="the tool's name as its plugin declared it")
    label: str | None = None
    description: str
    source: str = Field(description="where the tool comes from (plugin, core, code, ...)")
    input: str | None = Field(default=None, description="TypeScript of the input, in one line")
    output: str | None = Field(default=None, description="TypeScript of the output, in one line")


class CatalogAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tools: list[ToolHandle]
    quick_index: str = Field(description="one line per tool, for an agent's prompt")


class ApiFileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="e.g. results.d.ts, tools/<name>.d.ts, mcp/<server>.d.ts")
    description: str | None = None
    bytes: int | None = Field(default=None, description="absent for tool files (rendered when read)")


class ApiFileList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    files: list[ApiFileEntry]


class ApiFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    description: str | None = None
    content: str = Field(description="the TypeScript declaration text")
    bytes: int


class BlockedTool(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str
    reason: str


class FailureLimitsOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_failures_per_run: int
    failures_per_run: int


class SavedResultsUse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int
    bytes: int


class RunReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
    run_id: str
    failures: dict[str, int] = Field(description="counted failures per tool")
    total_failures: int
    blocked: list[BlockedTool]
    budget_exhausted: bool
    limits: FailureLimitsOut
    saved_results: SavedResultsUse


class RunEnded(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
    run_id: str
    expired_results: int


class StoreKey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    bytes: int


class StoreKeys(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
    keys: list[StoreKey]
    total_bytes: int


class SessionDeleted(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
    deleted: Literal[True]


class Health(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["ok"]


class SandboxReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: Literal["strict", "auto", "off"]
    layers: dict[str, bool] = Field(description="each confinement layer of the workers: in force or not")
    missing: dict[str, str] = Field(description="why each layer not in force is missing")


class Readiness(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["ok", "unavailable"]
    checks: dict[str, str] = Field(description='"ok" or what is wrong, per part (workers, store)')
    sandbox: SandboxReport
