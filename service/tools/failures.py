"""How a tool's failure reads (the tool failure contract): the fake-success flip, the reason order, the fields.

A tool fails by raising, by ``ToolResult(is_error=True)`` or by returning a dict with
``success: false`` / ``ok: false``.  ``failure_of`` turns a finished result's fields into a
``ToolExecutionError`` carrying the guest-visible fields; ``warning_of_result`` spots a partial
success (``success: true`` with ``completed: false`` or a ``warning``).
"""

from __future__ import annotations

from collections.abc import Mapping

from service.tools.errors import ToolExecutionError

__all__ = [
    "RECOVERABLE_TYPES",
    "exception_error_type",
    "failure_of",
    "truncated",
    "warning_of_result",
]

#: ``error_type`` values a model can fix by changing its arguments: they never count against a budget.
RECOVERABLE_TYPES = frozenset({"recoverable", "retryable", "need_input", "need_param"})
#: Exceptions that are network or timing jitter: worth a retry of an idempotent tool.
TRANSIENT_EXCEPTIONS = (TimeoutError, ConnectionError, OSError)
#: Where the reason is read from, in the seed's order.
_SUCCESS_FALSE_REASON = ("stderr", "error", "msg", "user_message")
_OK_FALSE_REASON = ("error", "msg")
_ERROR_RESULT_REASON = ("error", "message", "msg", "stderr", "user_message")
_MAX_REASON_BYTES = 4096
_MAX_WARNING_BYTES = 512


def exception_error_type(exc: BaseException) -> str | None:
    """``transient`` for timeouts and connection/OS errors, else None (the tool said nothing more)."""
    return "transient" if isinstance(exc, TRANSIENT_EXCEPTIONS) else None


def failure_of(
    details: object, text: str | None, is_error: bool, tool: str, *, untrusted: bool
) -> ToolExecutionError | None:
    """The failure a finished result (its details, text and error flag) reports, or None when it is a
    success; a call whose tool returned plain details makes no ``ToolResult``.

    ``success``/``ok`` must be ``False`` itself: a missing or ``None`` flag is no failure, and a
    ``code`` field never flips a result (the tool failure contract).
    """
    own = details if type(details) is dict or isinstance(details, Mapping) else None
    order: tuple[str, ...]
    if own is not None and own.get("success") is False:
        order = _SUCCESS_FALSE_REASON
    elif own is not None and own.get("ok") is False:
        order = _OK_FALSE_REASON
    elif is_error:
        order = _ERROR_RESULT_REASON
    else:
        return None
    reason = _first_text(own, order) or (text or "").strip()
    if not reason:
        reason = f"{tool} reported a failure without giving a reason; error.details holds everything it returned"
    fields, recoverable, non_retriable = _seed_fields(own)
    return ToolExecutionError(
        truncated(f"{tool} failed: {reason}", _MAX_REASON_BYTES),
        tool=tool,
        effect_started=True,
        untrusted=untrusted,
        reported=details,
        fields=fields,
        recoverable=recoverable,
        non_retriable=non_retriable,
    )


def warning_of_result(details: object, tool: str) -> str | None:
    """An envelope warning for a partial success, or None."""
    if not (type(details) is dict or isinstance(details, Mapping)) or details.get("success") is not True:
        return None
    warning = details.get("warning")
    if isinstance(warning, str) and warning.strip():
        return truncated(f"{tool} succeeded only in part: {warning.strip()}", _MAX_WARNING_BYTES)
    if details.get("completed") is False:
        return f"{tool} succeeded only in part (completed: false); check its result before relying on it"
    return None


def _seed_fields(own: Mapping[str, object] | None) -> tuple[dict[str, object], bool, bool]:
    """The guest's camelCase fields, whether the failure is recoverable and whether it blocks at once."""
    if own is None:
        return {}, False, False
    fields: dict[str, object] = {}
    raw_type = own.get("error_type")
    need_param = own.get("need_param")
    recoverable = raw_type in RECOVERABLE_TYPES or "need_param" in own
    if recoverable:
        fields["errorType"] = "recoverable"
    elif raw_type in ("config", "transient"):
        fields["errorType"] = raw_type
    if isinstance(need_param, str):
        fields["needParam"] = need_param
    # non_retriable only applies to a failure the model cannot fix by changing its arguments.
    non_retriable = own.get("non_retriable") is True and not recoverable
    if "non_retriable" in own:
        fields["nonRetriable"] = non_retriable
    for key, camel in (("user_message", "userMessage"), ("redirect", "redirect"), ("upstream", "upstream")):
        if own.get(key) is not None:
            fields[camel] = own[key]
    return fields, recoverable, non_retriable


def _first_text(own: Mapping[str, object] | None, order: tuple[str, ...]) -> str:
    if own is None:
        return ""
    for key in order:
        value = own.get(key)
        if isinstance(value, Mapping):
            value = value.get("message")
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def truncated(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (an ellipsis marks the cut)."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode("utf-8", errors="ignore") + "…"
