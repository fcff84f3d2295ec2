"""The one table from service errors to the guest's rejected ``Error``.

A handler that lets a service error (a tool call's, an MCP server's, a store's, an API file's) reach
the guest raises ``guest_error(exc)``: the class's entry here (found along its MRO, so a subclass takes
its parent's form with its own ``code``) says the guest Error's ``code``, its constructor ``name``
(``Error``, ``TypeError``, ``RangeError``), its ``errorType`` and ``effectStatus``, and which fields
of the exception it carries.  The message is the exception's own.  A new service error that can
reach the guest gets its form here; tests/service/capabilities/test_guest_errors.py walks every
exception class of the service and fails for one that has neither a form nor a reason it never
reaches the guest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from service.api_files.errors import ApiFileError
from service.errors import HelperFailed
from service.mcp.errors import McpError, McpTimeout, McpUnavailable
from service.runtime.dispatch import GuestError
from service.stores.errors import ResultsError, ResultUnavailableError, StoreError, StoreLimitError, StoreTypeError
from service.tools.errors import SearchBudgetError, SearchQueryError, ToolCallError

__all__ = ["GUEST_FORMS", "GuestForm", "guest_error", "guest_form"]


@dataclass(frozen=True, slots=True)
class GuestForm:
    """How an exception class reads in the guest."""

    #: The guest Error's constructor name (``err.name``): ``TypeError`` for a value of the wrong type or
    #: shape, ``RangeError`` for a size or count over a limit, else ``Error``.
    name: str = "Error"
    #: ``err.code``; None: the exception's own ``code``.
    code: str | None = None
    #: ``err.errorType``: ``transient`` when trying again later may work.
    error_type: str | None = None
    #: ``err.effectStatus``: ``unknown`` when the call may have had effects.
    effect_status: str | None = None
    #: More fields, read from the exception (a tool call's: tool, details, effectStatus, ...).
    fields: Callable[[Exception], Mapping[str, object]] | None = None


def _tool_call_fields(exc: Exception) -> Mapping[str, object]:
    assert isinstance(exc, ToolCallError)
    return exc.to_guest()


_TOOL_CALL = GuestForm(fields=_tool_call_fields)

#: Exception class -> its guest form.  A class not listed takes the form of its nearest listed base.
GUEST_FORMS: Mapping[type[Exception], GuestForm] = {
    # A tool call refused or failed (native, client or MCP): its own code and fields (ToolCallError.to_guest).
    ToolCallError: _TOOL_CALL,
    SearchBudgetError: GuestForm(name="RangeError", fields=_tool_call_fields),
    # catalog.search with a query over a cap.
    SearchQueryError: GuestForm(name="RangeError", code="invalid_input"),
    # An MCP request the server or the hub could not serve (the call's tool is added by the caller).
    McpError: GuestForm(),
    McpUnavailable: GuestForm(error_type="transient"),
    McpTimeout: GuestForm(error_type="transient"),
    # A session store or saved results whose backend is down: retrying shortly may work.
    StoreError: GuestForm(code="store_unavailable", error_type="transient"),
    StoreLimitError: GuestForm(name="RangeError"),
    StoreTypeError: GuestForm(name="TypeError"),
    ResultsError: GuestForm(name="RangeError"),
    ResultUnavailableError: GuestForm(),
    # A malformed API file path, or one naming no file.
    ApiFileError: GuestForm(code="invalid_input"),
    # No helper could check an MCP tool's result: the service's trouble, after the tool ran.
    HelperFailed: GuestForm(error_type="transient", effect_status="unknown"),
}

_found: dict[type[BaseException], GuestForm | None] = {}


def guest_form(cls: type[BaseException]) -> GuestForm | None:
    """The guest form of exception class ``cls`` (its nearest listed class's), or None when it has none."""
    try:
        return _found[cls]
    except KeyError:
        form = next((GUEST_FORMS[c] for c in cls.__mro__ if c in GUEST_FORMS), None)
        _found[cls] = form
        return form


def guest_error(exc: Exception, **fields: object) -> GuestError:
    """The guest's rejection for ``exc``, with ``fields`` (e.g. the call's ``tool``) beside the form's own.

    An exception with no guest form is a bug in its handler: ``TypeError`` here, which the dispatcher
    turns into the guest's sanitised ``tool_error``.
    """
    form = guest_form(type(exc))
    if form is None:
        raise TypeError(f"{type(exc).__name__} has no guest form (service/capabilities/guest_errors.py)")
    message = getattr(exc, "message", None)
    code = form.code or getattr(exc, "code", None)
    extra: dict[str, object] = dict(fields)
    if form.fields is not None:
        extra.update(form.fields(exc))
    if form.error_type is not None:
        extra["errorType"] = form.error_type
    if form.effect_status is not None:
        extra["effectStatus"] = form.effect_status
    return GuestError(
        message if isinstance(message, str) else str(exc),
        code if isinstance(code, str) else "tool_error",
        form.name,
        extra,
    )
