"""One exception tree per package, one code style, and the codes callers see pinned.

A package with an ``errors`` module (bridge, guest_runtime, service and the service subpackages
tools, mcp, stores, api_files) owns every exception class defined in it or in a module below it that
has no ``errors`` module of its own.  Each such class lives in that ``errors`` module, derives from
the one root class there and has a snake_case ``code`` of its own, unique in the package.  Found by
walking and importing every module, so a class added anywhere later is checked too.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from dataclasses import dataclass

import pytest

PACKAGES = ("bridge", "guest_runtime", "service", "codemode_client")
SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")

#: Control-flow signals: not failures, so outside the trees (each module says why in a comment).
SIGNALS = {
    "service.runtime.dispatch.GuestError",  # a handler's rejection of a guest promise; carries another tree's code
    "service.runtime.dispatch.NeedsCaller",  # parks the cell for the API caller
    "service.http.request_gate.PeerGone",  # the client left mid-body; nobody to answer
    "service.cluster.relay.ServeHere",  # a stopped holder's cell is served here: nothing failed
    "service.tools.contracts.ValidationDeferred",  # repeat the check off the event loop
    "service.tools.contracts._TooMuchWork",  # unwinds jsonschema when the step budget runs out
    "service.tools.contracts._SchemaProblem",  # caught in its module, becomes invalid_contract
    "service.tools.errors.ClientToolCall",  # a client tool was called; `except ToolError` must miss it
    "guest_runtime.confinement._Refused",  # caught in its module: the layer is recorded as missing
    "guest_runtime.monty.values.NotJson",  # a Python guest value with no JSON form; the engine makes it a TypeError
}

#: Classes that deliberately share a code (with the class named): the code means the same to a caller.
SHARED_CODES = {
    "service.errors.MethodNotAllowed": "service.errors.InvalidRequest",  # a request the caller must change
    "service.tools.errors.ClientToolDeclError": "service.tools.errors.InvalidInputError",
    "service.tools.errors.ToolExecutionError": "service.tools.errors.ToolCallError",
    "service.stores.errors.StoreKeyError": "service.stores.errors.StoreTypeError",
}

#: The codes that reach callers: HTTP error bodies, guest-visible Error codes, envelope failure codes.
CONTRACT = {
    # HTTP error bodies {"error": {"code": ...}} (service/errors.py; docs/reference/errors.md)
    "service.errors.ServiceError": "service_error",
    "service.errors.InvalidRequest": "invalid_request",
    "service.errors.Unauthorized": "unauthorized",
    "service.errors.Forbidden": "forbidden",
    "service.errors.HostNotAllowed": "host_not_allowed",
    "service.errors.CellNotFound": "cell_not_found",
    "service.errors.CellDrained": "cell_drained",
    "service.errors.NotFound": "not_found",
    "service.errors.WaitInProgress": "wait_in_progress",
    "service.errors.BodyTooLarge": "body_too_large",
    "service.errors.TooManyRequests": "too_many_requests",
    "service.errors.Overloaded": "overloaded",
    "service.errors.StoreUnavailable": "store_unavailable",
    "service.errors.ReplicaDraining": "replica_draining",
    "service.errors.HelperFailed": "helper_failed",
    "service.errors.ResponseNotEncodable": "response_not_encodable",
    "service.errors.RequestStateRefused": "request_state_refused",  # the MCP facade's approval rounds
    "service.errors.SnapshotRefused": "snapshot_refused",  # a parked Python cell's stored state
    "service.errors.SnapshotTampered": "snapshot_tampered",
    "service.errors.SnapshotForeign": "snapshot_foreign",
    "service.errors.SnapshotVersionMismatch": "snapshot_version_mismatch",
    "service.errors.McpConfigError": "mcp_config",  # start-up: an unusable [mcp.servers.<name>] entry
    # guest-visible err.code of a rejected tool call (ToolCallError.to_guest)
    "service.tools.errors.ToolCallError": "tool_error",
    "service.tools.errors.ToolExecutionError": "tool_error",
    "service.tools.errors.ToolTimeoutError": "tool_timeout",
    "service.tools.errors.InvalidInputError": "invalid_input",
    "service.tools.errors.ClientToolDeclError": "invalid_input",
    "service.tools.errors.InputContractError": "input_contract",
    "service.tools.errors.OutputContractError": "output_contract",
    "service.tools.errors.InvalidContractError": "invalid_contract",
    "service.tools.errors.ToolBlockedError": "blocked",
    "service.tools.errors.ApprovalDeniedError": "approval_denied",
    "service.tools.errors.UnknownToolError": "unknown_tool",
    "service.tools.errors.LoopGuardError": "loop_guard",
    "service.tools.errors.CallBudgetError": "call_budget_exceeded",
    "service.tools.errors.SearchBudgetError": "search_budget_exceeded",
    # guest-visible err.code of MCP calls (their guest forms: service/capabilities/guest_errors.py)
    "service.mcp.errors.McpUnavailable": "mcp_unavailable",
    "service.mcp.errors.McpTimeout": "mcp_timeout",
    "service.mcp.errors.McpProtocolError": "mcp_protocol",
    "service.mcp.errors.McpUnknownTool": "mcp_unknown_tool",
    "service.mcp.errors.McpInvalidInput": "mcp_invalid_input",
    # guest-visible err.code of results.* and store writes (service/capabilities/)
    "service.stores.errors.ResultsCapacityError": "results_capacity",
    "service.stores.errors.ResultsAllowanceError": "results_allowance",
    "service.stores.errors.ResultsQuotaError": "results_quota",
    "service.stores.errors.ResultUnavailableError": "result_unavailable",
    "service.stores.errors.StoreLimitError": "store_range",
    "service.stores.errors.StoreQuotaError": "store_quota",
    "service.stores.errors.StoreTypeError": "store_type",
    # envelope failure codes the worker reports for these faults (guest_runtime/worker.py)
    "guest_runtime.errors.GuestSyntaxError": "invalid_input",
    "guest_runtime.errors.GuestTimeout": "timeout",
    "guest_runtime.errors.GuestFault": "uncaught_error",
    "guest_runtime.errors.EngineFault": "runtime_unavailable",
    # envelope failure code of a worker that died (service/runtime/cell.py)
    "service.errors.WorkerGone": "runtime_unavailable",
    "service.errors.MalformedFrame": "malformed_frame",
}


@dataclass(frozen=True)
class Tree:
    package: str  # "service.tools"
    root: type[BaseException]


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _modules() -> list[types.ModuleType]:
    found = []
    for pkg in PACKAGES:
        top = importlib.import_module(pkg)
        found.append(top)
        for info in pkgutil.walk_packages(top.__path__, pkg + "."):
            found.append(importlib.import_module(info.name))
    return found


def _exceptions(modules: list[types.ModuleType]) -> list[type[BaseException]]:
    return [
        obj
        for module in modules
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
    ]


def _trees(modules: list[types.ModuleType], signals: set[str]) -> dict[str, Tree]:
    """Each package with an ``errors`` module, and the one root class defined there."""
    trees = {}
    for module in modules:
        if not module.__name__.endswith(".errors"):
            continue
        package = module.__name__.rpartition(".")[0]
        own = [c for c in _exceptions([module]) if _name(c) not in signals]
        roots = [c for c in own if not any(b in own for b in c.__mro__[1:])]
        assert len(roots) == 1, f"{module.__name__} must define exactly one root exception, has {roots}"
        trees[package] = Tree(package, roots[0])
    return trees


def _tree_of(module: str, trees: dict[str, Tree]) -> Tree | None:
    while module:
        if module in trees:
            return trees[module]
        module = module.rpartition(".")[0]
    return None


def problems(
    classes: list[type[BaseException]], trees: dict[str, Tree], signals: set[str], shared: dict[str, str]
) -> list[str]:
    """Every breach of the rules above, one line each (empty when the code base conforms)."""
    found: list[str] = []
    codes: dict[tuple[str, str], str] = {}
    for cls in classes:
        name = _name(cls)
        if name in signals:
            continue
        tree = _tree_of(cls.__module__, trees)
        if tree is None:
            found.append(f"{name}: no package errors module above it")
            continue
        if cls.__module__ != f"{tree.package}.errors":
            found.append(f"{name}: defined outside {tree.package}.errors")
        if not issubclass(cls, tree.root):
            found.append(f"{name}: does not derive from {_name(tree.root)}")
        code = getattr(cls, "code", None)
        if "code" not in vars(cls) and name not in shared:
            found.append(f"{name}: no code of its own (give it one, or list it as sharing one)")
        if not isinstance(code, str) or not SNAKE.match(code):
            found.append(f"{name}: code {code!r} is not snake_case")
            continue
        first = codes.setdefault((tree.package, code), name)
        if first != name and shared.get(name) != first and shared.get(first) != name:
            found.append(f"{name}: code {code!r} already used by {first}")
    return found


@pytest.fixture(scope="module")
def our_modules() -> list[types.ModuleType]:
    return _modules()


def test_every_exception_is_in_its_package_tree_with_a_unique_snake_case_code(our_modules: list) -> None:
    """No class outside its package's errors module or tree, without a snake_case code, or reusing one."""
    trees = _trees(our_modules, SIGNALS)
    assert problems(_exceptions(our_modules), trees, SIGNALS, SHARED_CODES) == []


def test_each_package_has_its_one_root(our_modules: list) -> None:
    """The trees found are the ones the code base documents (so the walk did find them)."""
    roots = {package: _name(tree.root) for package, tree in _trees(our_modules, SIGNALS).items()}
    assert roots == {
        "bridge": "bridge.errors.BridgeError",
        "guest_runtime": "guest_runtime.errors.GuestRuntimeError",
        "service": "service.errors.ServiceError",
        "service.tools": "service.tools.errors.ToolError",
        "service.mcp": "service.mcp.errors.McpError",
        "service.stores": "service.stores.errors.StorageError",
        "service.api_files": "service.api_files.errors.ApiFileError",
        "codemode_client": "codemode_client.errors.CodemodeError",
    }


def test_listed_signals_and_shared_codes_exist(our_modules: list) -> None:
    """Every exemption names a class that exists, so a renamed class cannot keep a stale pass."""
    names = {_name(c) for c in _exceptions(our_modules)}
    assert names >= SIGNALS
    assert set(SHARED_CODES) | set(SHARED_CODES.values()) <= names


def test_codes_that_reach_callers_are_unchanged(our_modules: list) -> None:
    """HTTP error codes, guest-visible Error codes and envelope failure codes keep their values."""
    by_name = {_name(c): c for c in _exceptions(our_modules)}
    assert {name: getattr(by_name.get(name), "code", None) for name in CONTRACT} == CONTRACT


def _fake_package() -> tuple[list[type[BaseException]], dict[str, Tree]]:
    base = type("PkgError", (Exception,), {"code": "pkg_error", "__module__": "pkg.errors"})
    ok = type("GoodError", (base,), {"code": "good", "__module__": "pkg.errors"})
    stray = type("StrayError", (ValueError,), {"code": "stray", "__module__": "pkg.sub"})
    dotted = type("DottedError", (base,), {"code": "json.encode", "__module__": "pkg.errors"})
    again = type("AgainError", (base,), {"code": "good", "__module__": "pkg.errors"})
    silent = type("SilentError", (ok,), {"__module__": "pkg.errors"})
    orphan = type("OrphanError", (Exception,), {"code": "orphan", "__module__": "other"})
    return [base, ok, stray, dotted, again, silent, orphan], {"pkg": Tree("pkg", base)}


def test_the_check_reports_each_kind_of_breach() -> None:
    """A stray class, a dotted code, a reused code, a missing code and a class with no tree are all caught."""
    classes, trees = _fake_package()
    assert problems(classes, trees, set(), {}) == [
        "pkg.sub.StrayError: defined outside pkg.errors",
        "pkg.sub.StrayError: does not derive from pkg.errors.PkgError",
        "pkg.errors.DottedError: code 'json.encode' is not snake_case",
        "pkg.errors.AgainError: code 'good' already used by pkg.errors.GoodError",
        "pkg.errors.SilentError: no code of its own (give it one, or list it as sharing one)",
        "pkg.errors.SilentError: code 'good' already used by pkg.errors.GoodError",
        "other.OrphanError: no package errors module above it",
    ]
    shared = {"pkg.errors.SilentError": "pkg.errors.GoodError"}
    assert not [p for p in problems(classes, trees, set(), shared) if p.startswith("pkg.errors.SilentError")]


def test_a_cells_own_faults_have_guest_side_codes_in_the_reference() -> None:
    """The codes the worker reports for a cell's own faults are pinned, none is internal_error, and the error
    reference's table of cell failure codes lists each."""
    from pathlib import Path

    from guest_runtime import errors

    codes = {errors.UNCAUGHT_ERROR, errors.STALLED, errors.REQUEST_LIMIT_EXCEEDED}
    assert codes == {"uncaught_error", "stalled", "request_limit_exceeded"}
    reference = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    table = reference[reference.index("## Cell failure codes") : reference.index("## Call errors")]
    assert all(f"| `{code}` |" in table for code in codes | {"internal_error"}), table
