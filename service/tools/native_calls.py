"""Native and client tool calls as call targets: contracts, hooks, retries, the tool's clock and its reply.

``NativeCalls`` is one cell's native side of the tools (the catalog's hooks, the approval rules worked
out per tool, the breaker, the retries and warnings counted); ``NativeCalls.target(name)`` is one
call's ``CallTarget`` (``service.tools.call_contract``), which ``CallSession.run`` drives.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from bridge import jsoncodec
from bridge.json_types import JsonValue
from service.tools.approvals import ApprovalRules, NeedsApproval, hook_reason
from service.tools.call_contract import UNPARSED, CallOutcome, Counted, Overdue, Unparsed
from service.tools.clocks import CallClock
from service.tools.contracts import MAX_VALIDATION_STEPS, ValidationDeferred
from service.tools.errors import (
    ClientToolCall,
    InputContractError,
    OutputContractError,
    ToolBlockedError,
    ToolCallError,
    ToolExecutionError,
)
from service.tools.failures import exception_error_type, failure_of, warning_of_result
from service.tools.hooks import Block, HookCall, maybe_await, merge_after_result
from service.tools.plugin import ToolContext, ToolResult
from service.tools.policy import PolicySubject
from service.tools.run_budget import Breaker
from service.tools.untrusted import wrap_untrusted

if TYPE_CHECKING:
    from service.tools.catalog import CatalogView, ToolEntry

__all__ = ["INLINE_STEPS", "MAX_ATTEMPTS", "NativeCalls", "NativeTarget"]

_R = TypeVar("_R")

_MAX_ERROR_BYTES = 4096
#: Schema checks run on the event loop for at most this many keyword evaluations (~5-30 ms); one
#: that needs more is repeated in a thread with the full (still bounded) budget.
INLINE_STEPS = 2000
#: Tool replies larger than this are decoded and checked in a thread straight away.
_INLINE_BYTES = 64 * 1024
#: Attempts in all for an idempotent tool raising a transient error (the tool failure contract), and the first pause.
MAX_ATTEMPTS = 3
_RETRY_PAUSE_S = 0.05
#: Envelope warnings about partial successes one cell collects at most.
_MAX_WARNINGS = 20


class NativeCalls:
    """One cell's native and client tool calls: what their targets share. Use from the cell's event loop."""

    def __init__(self, view: CatalogView, breaker: Breaker, approvals: ApprovalRules) -> None:
        self.view = view
        self.breaker = breaker
        self.approvals = approvals
        # The catalog's hooks are fixed: a call without any skips their loops (and their awaits).
        self.before_hooks = tuple(hook for hook in view.catalog.hooks if hook.before is not None)
        self.after_hooks = tuple(hook for hook in view.catalog.hooks if hook.after is not None)
        # Callable name -> the target of its calls, made once per cell (the rules are fixed): a tool whose
        # output schema has branches gets a target per call instead (it keeps the call's input).
        self._targets: dict[str, NativeTarget] = {}
        self.retries = 0
        self.warnings: list[str] = []

    def requested(self, args: list[JsonValue]) -> tuple[NativeTarget, JsonValue]:
        """A guest's ``tool(name, input)`` request: the target (whatever the guest sent as the name: the
        view answers a non-string as an unknown tool) and the input."""
        return self.target(args[0] if args else None), args[1] if len(args) > 1 else {}

    def target(self, callable_name: object) -> NativeTarget:
        """The target of one call of ``callable_name`` (UnknownToolError, InvalidContractError)."""
        entry = self.view.require(callable_name)
        name = entry.callable_name
        entry.contract.ensure_usable(name)
        target = self._targets.get(name)
        if target is None:
            subject = PolicySubject(entry.tool_name, entry.tool_id, entry.plugin_id, entry.source)
            target = self._targets[name] = NativeTarget(self, entry, self.approvals.native(subject))
        return target if entry.contract.variants is None else NativeTarget(self, entry, target.approval_reason())

    def warn(self, warning: str, entry: ToolEntry) -> None:
        if len(self.warnings) < _MAX_WARNINGS:
            self.warnings.append(wrap_untrusted(warning, entry.callable_name) if entry.network else warning)


class NativeTarget:
    """One call of a catalog tool (a native tool, or a client tool the API caller runs)."""

    __slots__ = ("_calls", "_caller_encoded", "_reason", "entry", "loop_key", "name", "prepares", "runs_here")

    def __init__(self, calls: NativeCalls, entry: ToolEntry, reason: str | None) -> None:
        self._calls = calls
        self._reason = reason  # why its calls wait for approval (the approval rules), or None
        self.entry = entry
        self.name = entry.callable_name
        self.loop_key = (entry.source, entry.tool_id)
        self.runs_here = entry.source != "client"
        self.prepares = bool(calls.before_hooks)
        # For a contract with output branches, the caller's input encoded (hooks or the tool may change
        # it in place; the branch is the caller's): set per call, so such a target serves one call.
        self._caller_encoded: bytes | None = None

    def check_input(self, value: JsonValue, max_steps: int | None = None) -> None:
        contract = self.entry.contract
        if max_steps is None:
            contract.check_input(value, self.name)
        else:
            contract.check_input(value, self.name, max_steps=max_steps)
        if contract.variants is not None:
            self._caller_encoded = jsoncodec.dumps_kept(value)

    async def prepare(self, value: JsonValue, ctx: ToolContext) -> tuple[JsonValue, str | None]:
        """The input after the catalog's before-hooks (checked again when they rewrote it)."""
        prepared, rewritten, asked = await self._run_before_hooks(value, ctx)
        if rewritten:
            await _checked(self.entry.contract.check_input, prepared, self.name, error=InputContractError)
        return prepared, asked

    def approval_reason(self) -> str | None:
        return self._reason

    async def invoke(
        self, prepared: JsonValue, ctx: ToolContext, deadline: float | None, overdue: Overdue | None
    ) -> CallOutcome:
        entry = self.entry
        if not self.runs_here:
            raise ClientToolCall(
                call_id=ctx.call_id, tool_name=entry.tool_name, callable_name=self.name, params=prepared
            )
        if entry.timeout_s is None:
            raw = await self._execute(prepared, ctx, deadline)
        else:  # the tool's wall clock (no timer of its own, no task), inline: no coroutine of its own
            with CallClock(entry.timeout_s, self.name, overdue):
                raw = await self._execute(prepared, ctx, deadline)
        if self._calls.after_hooks:
            raw = await self._run_after_hooks(prepared, ctx, raw)
        # A plain return value is the details of a successful result: no ToolResult is made for it.
        details, text, is_error = (
            (raw.details, raw.text, raw.is_error) if isinstance(raw, ToolResult) else (raw, None, False)
        )
        failure = failure_of(details, text, is_error, self.name, untrusted=entry.network)
        if failure is not None:
            raise self._reported(failure, details)
        warning = warning_of_result(details, self.name)
        if warning is not None:
            self._calls.warn(warning, entry)
        encoded = _json_bytes(details, self.name, entry.network)
        parsed: JsonValue | Unparsed = UNPARSED
        if entry.contract.output_schema is not None:
            # The caller's own input picks the schema branch (without branches, any input picks the same).
            caller_encoded = self._caller_encoded
            caller_input = prepared if caller_encoded is None else jsoncodec.loads(caller_encoded)
            # Validation needs the value; big untyped replies skip this decode entirely.
            if len(encoded) > _INLINE_BYTES:
                parsed = await asyncio.to_thread(_checked_output, entry, encoded, caller_input, prepared)
            else:
                parsed = await _checked(_checked_output, entry, encoded, caller_input, prepared)
        self._calls.breaker.record(ctx.tenant, entry.tool_id, ok=True)
        return CallOutcome(self.name, encoded, text, False, entry.network, parsed)

    def counted(self, exc: Exception, ctx: ToolContext) -> Counted | None:
        """A non-recoverable failure of the tool itself counts against the run (the tool failure contract)."""
        if isinstance(exc, ToolExecutionError) and exc.recoverable:
            return None
        if not isinstance(exc, ToolExecutionError | OutputContractError):
            return None  # input validation and guard refusals are the caller's to fix
        self._calls.breaker.record(ctx.tenant, self.entry.tool_id, ok=False)
        non_retriable = isinstance(exc, ToolExecutionError) and exc.non_retriable
        # A network tool's words never reach the block message other cells see.
        return Counted(non_retriable, "" if exc.untrusted else exc.message)

    def _reported(self, failure: ToolExecutionError, details: object) -> ToolExecutionError:
        """A failure the tool reported: its own object reaches the guest as error.details (JSON, detached
        from the tool), and a network tool's words are marked untrusted."""
        failure.reported = jsoncodec.loads(_json_bytes(details, self.name, self.entry.network))
        if self.entry.network:
            failure.message = wrap_untrusted(failure.message, self.name)
        return failure

    def _hook_call(self, params: JsonValue, ctx: ToolContext) -> HookCall:
        e = self.entry
        return HookCall(e.tool_name, e.callable_name, e.tool_id, e.plugin_id, e.source, params, ctx)

    async def _run_before_hooks(self, params: JsonValue, ctx: ToolContext) -> tuple[JsonValue, bool, str | None]:
        """The arguments after every before-hook, whether any ran, and why a hook asked for approval."""
        ran = False
        asked: str | None = None
        for hook in self._calls.before_hooks:
            assert hook.before is not None
            ran = True
            try:
                outcome = await maybe_await(hook.before(self._hook_call(params, ctx)))
            except ToolCallError:
                raise
            except Exception as exc:  # noqa: BLE001 - a hook bug must not crash the host
                raise _sanitised(self.entry, exc, stage="a before-hook", started=False) from None
            if isinstance(outcome, Block):
                raise ToolBlockedError(f"{self.name} was blocked: {outcome.reason}", tool=self.name)
            if isinstance(outcome, NeedsApproval):
                # Later hooks still run: one of them may block the call, and then nobody is asked.
                asked = asked or hook_reason(self.name, outcome)
            elif outcome is not None:
                params = cast("JsonValue", outcome)  # the hook's replacement input (plugin code: trusted to be JSON)
        return params, ran, asked

    async def _execute(self, params: JsonValue, ctx: ToolContext, deadline: float | None) -> object:
        """What the tool's execute() returned: a ``ToolResult`` or the details of a successful one."""
        entry, calls = self.entry, self._calls
        assert entry.spec is not None
        attempts = MAX_ATTEMPTS if entry.spec.idempotent else 1
        # A retry starts from the arguments as they were (a failed attempt may have changed them in place).
        fresh = _retry_copies(params) if attempts > 1 else None
        retrying = False  # this call holds one of the breaker's retries
        try:
            for attempt in range(1, attempts + 1):
                try:
                    given = params if fresh is None or attempt == 1 else fresh()
                    # The tool gets whatever JSON its input schema accepted (``Execute`` names only the usual object).
                    raw = entry.spec.execute(ctx.call_id, given, ctx)  # type: ignore[arg-type]
                    if inspect.isawaitable(raw):  # sync or async (inline: no coroutine of its own)
                        raw = await raw
                except ToolCallError as exc:
                    exc.effect_started = True
                    exc.tool = exc.tool or self.name
                    raise
                except Exception as exc:  # noqa: BLE001 - tool bugs become tool_error, never a host crash
                    error_type = exception_error_type(exc)
                    pause = _RETRY_PAUSE_S * 2 ** (attempt - 1)
                    if (
                        error_type == "transient"
                        and attempt < attempts
                        and _time_left(deadline) > pause
                        and (retrying or calls.breaker.start_retry(ctx.tenant, entry.tool_id))
                    ):
                        retrying = True
                        calls.retries += 1
                        await asyncio.sleep(pause)
                        continue
                    raise _sanitised(entry, exc, stage="the tool", started=True, error_type=error_type) from None
                return raw
            raise AssertionError("unreachable: the last attempt returns or raises")
        finally:
            if retrying:
                calls.breaker.end_retry(ctx.tenant, entry.tool_id)

    async def _run_after_hooks(self, params: JsonValue, ctx: ToolContext, raw: object) -> ToolResult:
        """The result after every after-hook, from what the tool returned (hooks see a ``ToolResult``)."""
        result = raw if isinstance(raw, ToolResult) else ToolResult(details=raw)
        for hook in self._calls.after_hooks:
            assert hook.after is not None
            try:
                override = await maybe_await(hook.after(self._hook_call(params, ctx), result))
                result = merge_after_result(result, override)
            except ToolCallError as exc:
                exc.effect_started = True
                raise
            except Exception as exc:  # noqa: BLE001
                raise _sanitised(self.entry, exc, stage="an after-hook", started=True) from None
        return result


def _retry_copies(params: JsonValue) -> Callable[[], JsonValue]:
    """Fresh copies of ``params`` for retries, parsed from their encoding, kept meanwhile: a parsed copy
    would hold as much again as the arguments while the first attempt runs (they are charged once)."""
    try:
        encoded = jsoncodec.dumps_kept(params)
    except jsoncodec.JSONEncodeError:  # integers beyond 64 bits (a before-hook's): a copy kept aside
        spare = jsoncodec.copied(params)
        return lambda: jsoncodec.copied(spare)
    return lambda: jsoncodec.loads(encoded)


async def _checked(check: Callable[..., _R], *args: object, **kwargs: object) -> _R:
    """Run a schema check inline with a small step budget, or in a thread when it needs more."""
    try:
        return check(*args, max_steps=INLINE_STEPS, **kwargs)
    except ValidationDeferred:
        return await asyncio.to_thread(check, *args, **kwargs)


def _checked_output(
    entry: ToolEntry,
    encoded: bytes,
    caller_input: JsonValue,
    prepared: JsonValue,
    max_steps: int = MAX_VALIDATION_STEPS,
) -> JsonValue:
    parsed: JsonValue = jsoncodec.loads(encoded)
    entry.contract.check_output(
        parsed, entry.callable_name, caller_input=caller_input, prepared_input=prepared, max_steps=max_steps
    )
    return parsed


def _time_left(deadline: float | None) -> float:
    if deadline is None:
        return float("inf")
    return deadline - asyncio.get_running_loop().time()


def _sanitised(
    entry: ToolEntry, exc: Exception, *, stage: str, started: bool, error_type: str | None = None
) -> ToolExecutionError:
    text = str(exc)
    message = f"{entry.callable_name} failed in {stage}: {type(exc).__name__}" + (f": {text}" if text else "")
    raw = message.encode("utf-8")
    if len(raw) > _MAX_ERROR_BYTES:
        message = raw[: _MAX_ERROR_BYTES - 3].decode("utf-8", errors="ignore") + "…"
    if entry.network:
        message = wrap_untrusted(message, entry.callable_name)
    return ToolExecutionError(
        message,
        tool=entry.callable_name,
        effect_started=started,
        untrusted=entry.network,
        fields={"errorType": error_type} if error_type else None,
    )


def _json_bytes(value: object, tool: str, network: bool) -> bytes:
    """Compact JSON of a tool's details (pydantic models dumped); anything else is a tool_error.

    Encoding once detaches the result from the tool's own objects; a pure-Python copy cost
    ~0.7 s on a 10 MiB reply.  Non-finite floats become null, as JSON.stringify does in the guest.
    """
    try:
        return jsoncodec.dumps(value, default=_dump_model)
    except (TypeError, ValueError) as exc:
        raise ToolExecutionError(
            f"{tool} returned a value that is not JSON: {exc}",
            tool=tool,
            effect_started=True,
            untrusted=network,
        ) from None


def _dump_model(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON (convert it to dict/list/str/number/bool/None)")
