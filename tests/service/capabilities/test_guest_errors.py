"""The one table from service errors to the guest's rejected Error (service/capabilities/guest_errors.py).

Every exception class of the service either has a guest form or is named below with the reason it
never reaches guest code: found by walking and importing every module, so a class added later fails
here until someone decides how the guest sees it.  The forms themselves are pinned against what the
handlers wrote by hand before the table.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import service
from service.api_files.errors import ApiFileError
from service.capabilities.guest_errors import GUEST_FORMS, guest_error, guest_form
from service.errors import HelperFailed, Overloaded
from service.mcp.errors import McpInvalidInput, McpProtocolError, McpTimeout, McpUnavailable, McpUnknownTool
from service.stores.errors import (
    ResultsQuotaError,
    ResultUnavailableError,
    StoreKeyError,
    StoreLimitError,
    StoreQuotaError,
    StoreUnavailableError,
)
from service.tools.errors import (
    FailureBudgetError,
    LoopGuardError,
    SearchBudgetError,
    SearchQueryError,
    ToolExecutionError,
    ToolTimeoutError,
)
from tests.test_errors import CONTRACT, SIGNALS

#: Exception classes of the service that never reach guest code, and why.
NEVER_GUEST = {
    # HTTP answers, start-up and client-side failures: only the HTTP layer, the CLI or the cell layer see them.
    "service.errors.ServiceError": "the HTTP layer's base",
    "service.errors.InvalidRequest": "an HTTP request field (422)",
    "service.errors.MethodNotAllowed": "HTTP 405",
    "service.errors.RequestStateRefused": "the MCP facade's approval rounds",
    "service.errors.Unauthorized": "HTTP 401",
    "service.errors.Forbidden": "HTTP 403",
    "service.errors.HostNotAllowed": "HTTP 421",
    "service.errors.CellNotFound": "HTTP 404",
    "service.errors.CellDrained": "HTTP 404",
    "service.errors.NotFound": "HTTP 404 (API files outside a cell; inside, ApiFileError)",
    "service.errors.WaitInProgress": "HTTP 409",
    "service.errors.BodyTooLarge": "HTTP 413",
    "service.errors.TooManyRequests": "HTTP 429; a cell's helper jobs wait instead (HelperPool.run_for(wait=True))",
    "service.errors.Overloaded": "HTTP 503",
    "service.errors.StoreUnavailable": "HTTP 503; inside a cell a store failure is a StoreError",
    "service.errors.ReplicaUnavailable": "HTTP 503",
    "service.errors.ReplicaDraining": "HTTP 503",
    "service.errors.ResponseNotEncodable": "HTTP 500",
    "service.errors.WorkerGone": "the cell's runtime_unavailable envelope",
    "service.errors.IllegalTransition": "a bug in the cell's state machine (HTTP 500)",
    "service.errors.SnapshotRefused": "HTTP 409: a wait taking up a parked cell another replica wrote out",
    "service.errors.SnapshotTampered": "HTTP 409 (a SnapshotRefused)",
    "service.errors.SnapshotForeign": "HTTP 409 (a SnapshotRefused)",
    "service.errors.SnapshotVersionMismatch": "HTTP 409 (a SnapshotRefused)",
    "service.errors.MalformedFrame": "a /v1/monty connection's close code (1007, 1009): no cell of ours runs there",
    "service.errors.ServerUnreachable": "codemode exec --url",
    "service.errors.ServerRefused": "codemode exec --url",
    "service.errors.ConfigError": "start-up",
    "service.errors.McpConfigError": "start-up",
    # The tool system's own failures outside a call: start-up, schemas and patterns checked beforehand.
    "service.tools.errors.ToolError": "the tools package's base; guest-facing ones are ToolCallErrors",
    "service.tools.errors.ToolConfigError": "start-up (a plugin or policy entry)",
    "service.tools.errors.PatternError": "start-up or a caller's schema (422)",
    "service.tools.errors.SchemaRefused": "a caller's schema (422); MCP output schemas make it mcp_protocol",
    "service.stores.errors.StorageError": "the stores package's base; handlers catch StoreError or ResultsError",
}


def _service_exceptions() -> list[type[BaseException]]:
    modules = [service] + [importlib.import_module(i.name) for i in pkgutil.walk_packages(service.__path__, "service.")]
    return [
        obj
        for module in modules
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
    ]


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_service_exception_has_a_guest_form_or_a_reason_it_never_reaches_the_guest():
    """Walk the exception trees: a class with neither (a new one) fails, and so does one with both."""
    classes = [c for c in _service_exceptions() if _name(c) not in SIGNALS]
    assert len(classes) > 60  # the walk found the trees (guards against a vacuous pass)
    undecided = [_name(c) for c in classes if guest_form(c) is None and _name(c) not in NEVER_GUEST]
    assert undecided == [], "give these a form in service/capabilities/guest_errors.py, or say why they never reach it"
    contradicted = [_name(c) for c in classes if guest_form(c) is not None and _name(c) in NEVER_GUEST]
    assert contradicted == []
    stale = set(NEVER_GUEST) - {_name(c) for c in classes}
    assert stale == set()


def test_every_listed_form_belongs_to_a_service_exception():
    """The table names only exception classes of the service's trees."""
    assert all(cls.__module__.startswith("service.") for cls in GUEST_FORMS)


@pytest.mark.parametrize("cls", [c for c in _service_exceptions() if guest_form(c) is not None], ids=_name)
def test_guest_codes_are_the_pinned_codes(cls):
    """A class whose form keeps its own code shows the guest the code tests/test_errors.py pins for it."""
    form = guest_form(cls)
    assert form is not None
    if form.code is None and _name(cls) in CONTRACT:
        assert cls.code == CONTRACT[_name(cls)]


TOOL = "MCP.docs.echo"


#: (exception, fields the handler adds, the guest's Error payload)
FORMS = [
    # tool calls (native, client and MCP): ToolCallError.to_guest
    (
        LoopGuardError("again", tool="t"),
        {},
        {"code": "loop_guard", "message": "again", "tool": "t", "effectStatus": "not_started", "name": "Error"},
    ),
    (
        FailureBudgetError("spent", tool="t"),
        {},
        {
            "code": "failure_budget_exhausted",
            "message": "spent",
            "tool": "t",
            "effectStatus": "not_started",
            "nonRetriable": True,
            "name": "Error",
        },
    ),
    (
        ToolTimeoutError("late", tool=TOOL, limit_s=2.0),
        {},
        {
            "code": "tool_timeout",
            "message": "late",
            "tool": TOOL,
            "effectStatus": "unknown",
            "timeoutSeconds": 2.0,
            "name": "Error",
        },
    ),
    (
        ToolExecutionError("boom", tool="t", effect_started=True, fields={"errorType": "transient"}),
        {},
        {
            "code": "tool_error",
            "message": "boom",
            "tool": "t",
            "effectStatus": "unknown",
            "errorType": "transient",
            "name": "Error",
        },
    ),
    # catalog.search
    (
        SearchBudgetError("searched enough"),
        {},
        {
            "code": "search_budget_exceeded",
            "message": "searched enough",
            "effectStatus": "not_started",
            "name": "RangeError",
        },
    ),
    (SearchQueryError("too long"), {}, {"code": "invalid_input", "message": "too long", "name": "RangeError"}),
    # MCP: the server down or silent is transient; the caller's own mistakes are not
    (
        McpUnavailable("docs is down", server="docs"),
        {"tool": TOOL},
        {
            "code": "mcp_unavailable",
            "message": "docs is down",
            "tool": TOOL,
            "errorType": "transient",
            "name": "Error",
        },
    ),
    (
        McpTimeout("silent"),
        {},
        {"code": "mcp_timeout", "message": "silent", "errorType": "transient", "name": "Error"},
    ),
    (
        McpInvalidInput("bad input"),
        {"tool": TOOL},
        {"code": "mcp_invalid_input", "message": "bad input", "tool": TOOL, "name": "Error"},
    ),
    (McpProtocolError("broken"), {}, {"code": "mcp_protocol", "message": "broken", "name": "Error"}),
    (McpUnknownTool("no such"), {}, {"code": "mcp_unknown_tool", "message": "no such", "name": "Error"}),
    (
        HelperFailed("no helper"),
        {"tool": TOOL},
        {
            "code": "helper_failed",
            "message": "no helper",
            "tool": TOOL,
            "errorType": "transient",
            "effectStatus": "unknown",
            "name": "Error",
        },
    ),
    # the session store and saved results
    (
        StoreUnavailableError("session store unavailable: down"),
        {},
        {
            "code": "store_unavailable",
            "message": "session store unavailable: down",
            "errorType": "transient",
            "name": "Error",
        },
    ),
    (StoreLimitError("too big"), {}, {"code": "store_range", "message": "too big", "name": "RangeError"}),
    (StoreQuotaError("over quota"), {}, {"code": "store_quota", "message": "over quota", "name": "RangeError"}),
    (StoreKeyError("bad key"), {}, {"code": "store_type", "message": "bad key", "name": "TypeError"}),
    (ResultsQuotaError("full"), {}, {"code": "results_quota", "message": "full", "name": "RangeError"}),
    (
        ResultUnavailableError(),
        {},
        {
            "code": "result_unavailable",
            "message": "saved result is unavailable or expired; fetch fresh data if needed",
            "name": "Error",
        },
    ),
    # API files
    (
        ApiFileError("Unknown API file x"),
        {},
        {"code": "invalid_input", "message": "Unknown API file x", "name": "Error"},
    ),
]


@pytest.mark.parametrize(
    ("exc", "fields", "payload"), [pytest.param(*case, id=type(case[0]).__name__) for case in FORMS]
)
def test_guest_forms(exc, fields, payload):
    """Each form reads as the handlers wrote it by hand (store unavailability and SearchBudgetError's
    effectStatus are the CHANGELOG's harmonisations)."""
    assert guest_error(exc, **fields).payload() == payload


def test_the_message_is_the_exceptions_current_one():
    """A tool failure's message rewritten after it was raised (wrapped as untrusted) is what the guest sees."""
    exc = ToolExecutionError("raw", tool="t")
    exc.message = "wrapped"
    assert guest_error(exc).message == "wrapped"


def test_an_exception_without_a_form_is_a_handler_bug():
    """guest_error refuses a class with no form (the dispatcher then answers the guest's sanitised tool_error)."""
    with pytest.raises(TypeError, match="Overloaded has no guest form"):
        guest_error(Overloaded("busy"))
