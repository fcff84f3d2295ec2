"""Per-cell tool calls: budget, loop guard, contracts, hooks and execution."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from bridge import jsoncodec
from bridge.json_types import JsonObject, JsonValue
from service.tools.approvals import ApprovalRules, AskApproval, NeedsApproval, denial_message, hook_reason
from service.tools.clocks import CallClock
from service.tools.contracts import MAX_VALIDATION_STEPS, ValidationDeferred
from service.tools.errors import (
    ApprovalDeniedError,
    CallBudgetError,
    ClientToolCall,
    InputContractError,
    LoopGuardError,
    OutputContractError,
    SearchBudgetError,
    ToolBlockedError,
    ToolCallError,
    ToolExecutionError,
)
from service.tools.failures import exception_error_type, failure_of, warning_of_result
from service.tools.hooks import Block, HookCall, maybe_await, merge_after_result
from service.tools.plugin import ToolContext, ToolResult
from service.tools.policy import PolicySubject
from service.tools.run_budget import Breaker, FailureLimits, Reservation, RunLedger, RunState
from service.tools.untrusted import wrap_untrusted

if TYPE_CHECKING:
    from service.tools.catalog import CatalogView, ToolEntry

__all__ = ["DEFAULT_MAX_SEARCHES", "LOOP_GUARD_LIMIT", "CallOutcome", "CallSession"]

_R = TypeVar("_R")

#: Told a call's ``tool_timeout`` rejection when the call outlives its clock by ``CANCEL_GRACE_S``.
Overdue = Callable[[ToolCallError], None]

# The tool failure contract's loop guard: the 4th identical call (count > 3) is refused.
LOOP_GUARD_LIMIT = 3


class _Unparsed:
    """The type of ``_UNPARSED``: an outcome's details not decoded yet."""


_UNPARSED = _Unparsed()
_MAX_ERROR_BYTES = 4096
#: Schema checks run on the event loop for at most this many keyword evaluations (~5-30 ms); one
#: that needs more is repeated in a thread with the full (still bounded) budget.
_INLINE_STEPS = 2000
#: Tool replies larger than this are decoded and checked in a thread straight away.
_INLINE_BYTES = 64 * 1024
DEFAULT_MAX_SEARCHES = 200
#: Attempts in all for an idempotent tool raising a transient error (the tool failure contract), and the first pause.
MAX_ATTEMPTS = 3
_RETRY_PAUSE_S = 0.05
#: Loop-guard keys keep call arguments up to this many bytes of canonical JSON as they are, longer ones as a digest.
_MAX_KEPT_ARGUMENTS = 32
#: Envelope warnings about partial successes one cell collects at most.
_MAX_WARNINGS = 20


class CallOutcome:
    """A finished native call (read-only by convention): `details` go to the guest.

    `encoded` is the compact JSON of `details`, made once; the cell hands it to the guest as is.
    A slots class, not a frozen dataclass: one is made per call, and a frozen ``__init__`` costs
    a microsecond or two of the call.
    """

    __slots__ = ("callable_name", "encoded", "is_error", "network", "parsed", "text")

    def __init__(
        self,
        callable_name: str,
        encoded: bytes,
        text: str | None,
        is_error: bool,
        network: bool,
        parsed: JsonValue | _Unparsed = _UNPARSED,
    ) -> None:
        self.callable_name = callable_name
        self.encoded = encoded
        self.text = text
        self.is_error = is_error
        self.network = network
        self.parsed = parsed

    @property
    def details(self) -> JsonValue:
        parsed = self.parsed
        if isinstance(parsed, _Unparsed):
            parsed = self.parsed = jsoncodec.loads(self.encoded)
        return parsed


class CallSession:
    """Tool calls of one cell. Not thread-safe; use from the cell's event loop."""

    def __init__(
        self,
        view: CatalogView,
        *,
        max_calls: int,
        max_searches: int = DEFAULT_MAX_SEARCHES,
        ledger: RunLedger | None = None,
        breaker: Breaker | None = None,
        approvals: ApprovalRules | None = None,
    ) -> None:
        for name, cap in (("max_calls", max_calls), ("max_searches", max_searches)):
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
                raise ValueError(f"{name} must be a non-negative integer")
        self.view = view
        self.max_calls = max_calls
        self.max_searches = max_searches
        self.call_count = 0
        self.search_count = 0
        self.describe_count = 0
        self._repeats: dict[tuple[str, str, bytes | int], int] = {}
        # Without a run of its own (tests, embedding), the session is a run by itself.
        self.ledger = ledger or RunLedger(RunState(), FailureLimits())
        self.breaker = breaker or Breaker()
        self.approvals = approvals or ApprovalRules()
        # The catalog's hooks are fixed: a call without any skips their loops (and their awaits).
        self._before_hooks = tuple(hook for hook in view.catalog.hooks if hook.before is not None)
        self._after_hooks = tuple(hook for hook in view.catalog.hooks if hook.after is not None)
        self._approval_reasons: dict[str, str | None] = {}  # callable name -> why it needs approval
        self.retries = 0
        self.warnings: list[str] = []

    def record_search(self) -> None:
        """Count one `catalog.search` (telemetry)."""
        self.search_count += 1

    def record_describe(self) -> None:
        """Count one `describe()` (telemetry)."""
        self.describe_count += 1

    def search(self, query: object, limit: object = None) -> list[JsonObject]:
        """`catalog.search` through the view, counted; SearchBudgetError past ``max_searches``."""
        if self.search_count >= self.max_searches:
            raise SearchBudgetError(
                f"catalog.search was refused: this cell already searched {self.search_count} times, its "
                "budget. Keep the handles you found (or use catalog.all()) instead of searching again."
            )
        self.record_search()
        found = self.view.search(query, limit)
        blocked = self.ledger.blocked()
        return [{**meta, "blocked": True} if meta.get("callableName") in blocked else meta for meta in found]

    def describe(self, callable_name: object) -> JsonObject:
        """`handle.describe()` through the view, counted (a name the cell cannot see is an unknown tool)."""
        self.record_describe()
        return self.view.describe(self.view.require(callable_name).callable_name)

    async def call(self, callable_name: str, params: JsonValue, ctx: ToolContext) -> JsonValue:
        """Run one call and return the JSON details; raises ToolCallError or ClientToolCall."""
        return (await self.call_detailed(callable_name, params, ctx)).details

    async def call_detailed(
        self,
        callable_name: object,
        params: JsonValue,
        ctx: ToolContext,
        *,
        deadline: float | None = None,
        ask: AskApproval | None = None,
        handed_over: bool = False,
        overdue: Overdue | None = None,
    ) -> CallOutcome:
        """Like `call`, but returns text, error flag and network provenance too.

        Hooks and the tool may change their arguments in place, so they get a copy of ``params``;
        with ``handed_over`` the caller keeps no reference to ``params`` (a guest request's freshly
        parsed arguments) and they get ``params`` itself: the arguments exist parsed once.

        ``deadline`` (event-loop time) bounds the retries of an idempotent tool; time spent waiting
        for an approval through ``ask`` is added to it.  Without ``ask``, a call that needs approval
        is refused (``approval_denied``): nobody could be asked.

        A native tool's execute() runs on the tool's wall clock (``service.tools.clocks.CallClock``):
        past it the call is cancelled and rejects with ``tool_timeout``, a counted failure of the run.
        When the tool has not unwound ``CANCEL_GRACE_S`` later, ``overdue`` is told that rejection so
        the caller can answer the guest without waiting for the tool.
        """
        entry, caller_input, caller_encoded = await self._admitted(callable_name, params, handed_over)
        params = None
        name = entry.callable_name
        prepared: JsonValue = caller_input
        rewritten, asked = False, None
        if self._before_hooks:
            prepared, rewritten, asked = await self._run_before_hooks(entry, caller_input, ctx)
        caller_input = None  # the tool works on ``prepared``; an output check parses ``caller_encoded``
        if rewritten:
            await _checked(entry.contract.check_input, prepared, name, error=InputContractError)
        reason = asked or self._approval_reason(entry)
        if reason is not None:
            # While a person decides (maybe for as long as the cell stays parked) the input is held
            # encoded only: its parsed form can be many times the bytes charged for it.
            encoded = _encoded_input(name, prepared)
            prepared = None
            waited = await _approve(name, encoded, reason, ask)
            deadline = None if deadline is None else deadline + waited
            prepared = jsoncodec.loads(encoded)
            del encoded
        if entry.source == "client":
            raise ClientToolCall(call_id=ctx.call_id, tool_name=entry.tool_name, callable_name=name, params=prepared)
        # The place is taken only now: a call waiting for its approval holds none.
        reservation = self.ledger.take(name) or await self.ledger.hold(name)
        with reservation:
            try:
                outcome = await self._run(entry, caller_encoded, prepared, ctx, deadline, overdue)
            except ToolCallError as exc:
                self._count_failure(entry, exc, ctx, reservation)
                raise
        self.breaker.record(ctx.tenant, entry.tool_id, ok=True)
        return outcome

    async def _admitted(
        self, callable_name: object, params: JsonValue, handed_over: bool
    ) -> tuple[ToolEntry, JsonValue, bytes | None]:
        """The tool, the caller's input (checked, counted, loop-guarded) and, for a contract with output
        branches, that input encoded (hooks or the tool may change it in place; the branch is the caller's)."""
        entry = self.view.require(callable_name)
        name = entry.callable_name
        entry.contract.ensure_usable(name)
        self.ledger.check(name)
        self.spend_call(name)
        caller_input = {} if params is None else params if handed_over else jsoncodec.copied(params)
        params = None
        try:  # inline with a small step budget (no coroutine of its own); in a thread when it needs more
            entry.contract.check_input(caller_input, name, max_steps=_INLINE_STEPS)
        except ValidationDeferred:
            await asyncio.to_thread(entry.contract.check_input, caller_input, name)
        self.guard_loop(entry.source, entry.tool_id, name, caller_input)
        caller_encoded = jsoncodec.dumps_kept(caller_input) if entry.contract.variants is not None else None
        return entry, caller_input, caller_encoded

    async def _run(
        self,
        entry: ToolEntry,
        caller_encoded: bytes | None,
        prepared: JsonValue,
        ctx: ToolContext,
        deadline: float | None,
        overdue: Overdue | None,
    ) -> CallOutcome:
        name = entry.callable_name
        if entry.timeout_s is None:
            raw = await self._execute(entry, prepared, ctx, deadline)
        else:  # the tool's wall clock (no timer of its own, no task), inline: no coroutine of its own
            with CallClock(entry.timeout_s, name, overdue):
                raw = await self._execute(entry, prepared, ctx, deadline)
        if self._after_hooks:
            raw = await self._run_after_hooks(entry, prepared, ctx, raw)
        # A plain return value is the details of a successful result: no ToolResult is made for it.
        details, text, is_error = (
            (raw.details, raw.text, raw.is_error) if isinstance(raw, ToolResult) else (raw, None, False)
        )
        failure = failure_of(details, text, is_error, name, untrusted=entry.network)
        if failure is not None:
            # The tool's own object reaches the guest as error.details: JSON, detached from the tool.
            failure.reported = jsoncodec.loads(_json_bytes(details, name, entry.network))
            if entry.network:
                failure.message = wrap_untrusted(failure.message, name)
            raise failure
        warning = warning_of_result(details, name)
        if warning is not None and len(self.warnings) < _MAX_WARNINGS:
            self.warnings.append(wrap_untrusted(warning, name) if entry.network else warning)
        encoded = _json_bytes(details, name, entry.network)
        parsed: JsonValue | _Unparsed = _UNPARSED
        if entry.contract.output_schema is not None:
            # The caller's own input picks the schema branch (without branches, any input picks the same).
            caller_input = prepared if caller_encoded is None else jsoncodec.loads(caller_encoded)
            # Validation needs the value; big untyped replies skip this decode entirely.
            if len(encoded) > _INLINE_BYTES:
                parsed = await asyncio.to_thread(_checked_output, entry, encoded, caller_input, prepared)
            else:
                parsed = await _checked(_checked_output, entry, encoded, caller_input, prepared)
        return CallOutcome(name, encoded, text, is_error, entry.network, parsed)

    def _count_failure(self, entry: ToolEntry, exc: ToolCallError, ctx: ToolContext, reservation: Reservation) -> None:
        """Count a non-recoverable failure of the tool itself against the run (the tool failure contract)."""
        if isinstance(exc, ToolExecutionError) and exc.recoverable:
            return
        if not isinstance(exc, ToolExecutionError | OutputContractError):
            return  # input validation and guard refusals are the caller's to fix
        self.breaker.record(ctx.tenant, entry.tool_id, ok=False)
        non_retriable = isinstance(exc, ToolExecutionError) and exc.non_retriable
        # A network tool's words never reach the block message other cells see.
        reason = "" if exc.untrusted else exc.message
        reservation.fail(non_retriable=non_retriable, reason=reason)

    def _approval_reason(self, entry: ToolEntry) -> str | None:
        """Why calls of this tool need approval (or None), worked out once per cell: the rules are fixed."""
        key = entry.callable_name
        if key not in self._approval_reasons:
            subject = PolicySubject(entry.tool_name, entry.tool_id, entry.plugin_id, entry.source)
            self._approval_reasons[key] = self.approvals.native(subject)
        return self._approval_reasons[key]

    def spend_call(self, name: str) -> None:
        """Count one call of ``name`` (native, client or MCP) against the cell's budget, or refuse it."""
        if self.call_count >= self.max_calls:
            raise CallBudgetError(
                f"{name} was not called: this cell already made {self.call_count} tool calls, its budget. "
                "Batch the work into fewer calls or continue in a new cell.",
                tool=name,
            )
        self.call_count += 1

    def guard_loop(self, source: str, tool_key: str, name: str, params: JsonValue) -> None:
        """Count one call of the tool ``tool_key`` (of ``source``) with ``params``; refuse a 4th identical one."""
        try:
            canonical = jsoncodec.dumps(params, sort_keys=True)
        except jsoncodec.JSONEncodeError:
            return
        # A digest, not the text: a cell may make hundreds of calls with megabytes of arguments each.
        # BLAKE2b-128 is collision-resistant (a cell cannot make two argument sets collide); a text no
        # longer than a digest's hex is kept as it is (exact, and no hash).  A text is bytes and a
        # digest an int: the two kinds of key never equal each other.
        arguments: bytes | int = canonical
        if len(canonical) > _MAX_KEPT_ARGUMENTS:
            arguments = int.from_bytes(hashlib.blake2b(canonical, digest_size=16).digest())
        key = (source, tool_key, arguments)
        count = self._repeats.get(key, 0) + 1
        self._repeats[key] = count
        if count > LOOP_GUARD_LIMIT:
            raise LoopGuardError(
                f"{name} was refused: it was already called {LOOP_GUARD_LIMIT} times "
                "in this cell with exactly these arguments; repeating it will not give a different result. "
                "Change the arguments, use the earlier result, or stop.",
                tool=name,
            )

    def _hook_call(self, entry: ToolEntry, params: JsonValue, ctx: ToolContext) -> HookCall:
        return HookCall(entry.tool_name, entry.callable_name, entry.tool_id, entry.plugin_id, entry.source, params, ctx)

    async def _run_before_hooks(
        self, entry: ToolEntry, params: JsonValue, ctx: ToolContext
    ) -> tuple[JsonValue, bool, str | None]:
        """The arguments after every before-hook, whether any ran, and why a hook asked for approval."""
        ran = False
        asked: str | None = None
        for hook in self._before_hooks:
            assert hook.before is not None
            ran = True
            try:
                outcome = await maybe_await(hook.before(self._hook_call(entry, params, ctx)))
            except ToolCallError:
                raise
            except Exception as exc:  # noqa: BLE001 - a hook bug must not crash the host
                raise _sanitised(entry, exc, stage="a before-hook", started=False) from None
            if isinstance(outcome, Block):
                raise ToolBlockedError(f"{entry.callable_name} was blocked: {outcome.reason}", tool=entry.callable_name)
            if isinstance(outcome, NeedsApproval):
                # Later hooks still run: one of them may block the call, and then nobody is asked.
                asked = asked or hook_reason(entry.callable_name, outcome)
            elif outcome is not None:
                params = cast("JsonValue", outcome)  # the hook's replacement input (plugin code: trusted to be JSON)
        return params, ran, asked

    async def _execute(self, entry: ToolEntry, params: JsonValue, ctx: ToolContext, deadline: float | None) -> object:
        """What the tool's execute() returned: a ``ToolResult`` or the details of a successful one."""
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
                    exc.tool = exc.tool or entry.callable_name
                    raise
                except Exception as exc:  # noqa: BLE001 - tool bugs become tool_error, never a host crash
                    error_type = exception_error_type(exc)
                    pause = _RETRY_PAUSE_S * 2 ** (attempt - 1)
                    if (
                        error_type == "transient"
                        and attempt < attempts
                        and _time_left(deadline) > pause
                        and (retrying or self.breaker.start_retry(ctx.tenant, entry.tool_id))
                    ):
                        retrying = True
                        self.retries += 1
                        await asyncio.sleep(pause)
                        continue
                    raise _sanitised(entry, exc, stage="the tool", started=True, error_type=error_type) from None
                return raw
            raise AssertionError("unreachable: the last attempt returns or raises")
        finally:
            if retrying:
                self.breaker.end_retry(ctx.tenant, entry.tool_id)

    async def _run_after_hooks(self, entry: ToolEntry, params: JsonValue, ctx: ToolContext, raw: object) -> ToolResult:
        """The result after every after-hook, from what the tool returned (hooks see a ``ToolResult``)."""
        result = raw if isinstance(raw, ToolResult) else ToolResult(details=raw)
        for hook in self._after_hooks:
            assert hook.after is not None
            try:
                override = await maybe_await(hook.after(self._hook_call(entry, params, ctx), result))
                result = merge_after_result(result, override)
            except ToolCallError as exc:
                exc.effect_started = True
                raise
            except Exception as exc:  # noqa: BLE001
                raise _sanitised(entry, exc, stage="an after-hook", started=True) from None
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


def _encoded_input(name: str, prepared: JsonValue) -> bytes:
    try:
        return jsoncodec.dumps_kept(prepared)
    except jsoncodec.JSONEncodeError as exc:
        raise InputContractError(f"{name}: the input to approve is not JSON: {exc}", tool=name) from None


async def _approve(name: str, encoded: bytes, reason: str, ask: AskApproval | None) -> float:
    """Wait for the API caller's approval of one call (its input ``encoded``); the seconds it took, or raise if denied."""
    if ask is None:
        raise ApprovalDeniedError(f"{name} was not run: {reason}, and this cell cannot ask for it", tool=name)
    loop = asyncio.get_running_loop()
    started = loop.time()
    approved, why = await ask(name, encoded, reason)
    if not approved:
        raise ApprovalDeniedError(denial_message(name, why), tool=name)
    return loop.time() - started


async def _checked(check: Callable[..., _R], *args: object, **kwargs: object) -> _R:
    """Run a schema check inline with a small step budget, or in a thread when it needs more."""
    try:
        return check(*args, max_steps=_INLINE_STEPS, **kwargs)
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
