"""Route functions only: parse, authorise, call the services, shape the answer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import PlainTextResponse

from service.api.exec import cell_spec, wait_answers
from service.api.schemas import (
    ERROR_RESPONSES,
    ID_PATTERN,
    SESSION_PATTERN,
    ApiFile,
    ApiFileList,
    CatalogAnswer,
    CellEnvelope,
    ExecRequest,
    Health,
    Readiness,
    RunEnded,
    RunReport,
    SessionDeleted,
    StoreKeys,
    WaitRequest,
)
from service.assembly import Components
from service.errors import NotFound
from service.handlers.api_files import list_api_files, quick_index, read_api_file
from service.handlers.session_store import NETWORK_MARK_KEY
from service.settings import ApiKey
from service.stores import SessionStore
from service.stores.saved_results import ResultScope
from service.tools.run_budget import run_report

from .request_gate import GatedRoute, api_key_of
from .responses import JSONBytes

router = APIRouter(route_class=GatedRoute)

# Ids in paths are checked exactly like ids in bodies (same pattern, whole string).
CellId = Annotated[str, Path(pattern=ID_PATTERN, description="cell id from an envelope")]
SessionId = Annotated[str, Path(pattern=SESSION_PATTERN)]
RunId = Annotated[str, Path(pattern=SESSION_PATTERN)]
# The API contract names the parameter; what a tool shows depends on the key, not on a session (a run's
# blocked tools are in GET /v1/sessions/{id}/runs/{run}).
CatalogSession = Annotated[
    str | None,
    Query(pattern=SESSION_PATTERN, description="accepted and checked; the catalog is the same for every session"),
]
# Declaration files are one or two segments deep (results.d.ts, tools/<name>.d.ts, mcp/<server>.d.ts):
# one route each, so every URL the docs give is an operation of the OpenAPI document.
ApiDir = Annotated[str, Path(description="the file's folder: tools or mcp")]
ApiName = Annotated[str, Path(description="the file's name, e.g. results.d.ts or echo.d.ts")]

# OpenAPI examples of the answers besides the response models' own.
CATALOG_EXAMPLE = {
    "tools": [
        {
            "callableName": "quote_shipping",
            "toolName": "quote_shipping",
            "description": "Price a parcel",
            "source": "plugin",
            "input": "{ destination: string; origin: string; weight_kg: number }",
        }
    ],
    "quick_index": "- quote_shipping { ... } -> ?",
}
API_LIST_EXAMPLE = {
    "files": [
        {"path": "results.d.ts", "description": "Saved results", "bytes": 2474},
        {"path": "tools/echo.d.ts", "description": "echo: Echo x back"},
    ]
}
API_READ_EXAMPLE = {
    "path": "tools/echo.d.ts",
    "description": "echo: Echo x back",
    "content": "declare function echo(input?: { x?: unknown }): Promise<unknown>;",
    "bytes": 66,
}
END_RUN_EXAMPLE = {"session_id": "s1", "run_id": "turn-7", "expired_results": 2}
RUN_EXAMPLE = {
    "session_id": "s1",
    "run_id": "turn-7",
    "failures": {"fetch_page": 4, "quote_shipping": 1},
    "total_failures": 5,
    "blocked": [{"tool": "fetch_page", "reason": "it failed 4 times in this run (limit 4 per tool per run)"}],
    "budget_exhausted": False,
    "limits": {"tool_failures_per_run": 4, "failures_per_run": 8},
    "saved_results": {"count": 1, "bytes": 2048},
}
STORE_KEYS_EXAMPLE = {"session_id": "s1", "keys": [{"key": "cursor", "bytes": 12}], "total_bytes": 12}
SESSION_DELETED_EXAMPLE = {"session_id": "s1", "deleted": True}
HEALTH_EXAMPLE = {"status": "ok"}
READY_EXAMPLE = {
    "status": "ok",
    "checks": {"workers": "ok", "store": "ok"},
    "sandbox": {
        "mode": "auto",
        "layers": {
            "fds": True,
            "network": True,
            "capabilities": True,
            "uid": True,
            "not_dumpable": True,
            "no_new_privs": True,
            "landlock": True,
            "rlimits": True,
            "seccomp": True,
        },
        "missing": {},
    },
}


async def services(request: Request) -> Components:
    # async: a plain def dependency would hop through the thread pool on every request
    return request.app.state.services  # type: ignore[no-any-return]


async def caller(request: Request) -> ApiKey:
    # The request gate resolved the key from the headers before the body was read.
    return api_key_of(request)


def _services_and_key(request: Request) -> tuple[Components, ApiKey]:
    return request.app.state.services, api_key_of(request)


ServicesDep = Annotated[Components, Depends(services)]
CallerDep = Annotated[ApiKey, Depends(caller)]


def _example(example: Any) -> dict[str, Any]:
    return {"content": {"application/json": {"example": example}}}


@router.post("/v1/exec", response_model=CellEnvelope, responses=ERROR_RESPONSES, tags=["cells"], summary="Run a cell")
async def exec_cell(body: ExecRequest, request: Request) -> JSONBytes:
    """Start a cell and run it until it completes, fails, or parks (``waiting``); with ``background``,
    answer ``running`` at once while the cell runs on its own."""
    # The hot path resolves services and the key inline: each FastAPI dependency costs a solve.
    svc, key = _services_and_key(request)
    spec = await cell_spec(svc, key, body)
    return JSONBytes(await svc.cells.exec(spec, svc.tracing.parent_from_scope(request.scope)))


@router.post(
    "/v1/cells/{cell_id}/wait",
    response_model=CellEnvelope,
    responses=ERROR_RESPONSES,
    tags=["cells"],
    summary="Resume a waiting cell",
)
async def wait_cell(cell_id: CellId, request: Request, body: WaitRequest | None = None) -> JSONBytes:
    """Resume a parked cell (optionally with client tool results and approval answers) until its next stop."""
    svc, key = _services_and_key(request)
    body = body or WaitRequest()
    results, approvals = wait_answers(body)
    return JSONBytes(
        await svc.cells.wait(
            cell_id,
            key.tenant,
            timeout_ms=body.timeout_ms,
            tool_results=results,
            session_id=body.session_id,
            approvals=approvals,
            trace_parent=svc.tracing.parent_from_scope(request.scope),
        )
    )


@router.post(
    "/v1/cells/{cell_id}/cancel",
    response_model=CellEnvelope,
    responses=ERROR_RESPONSES,
    tags=["cells"],
    summary="Cancel a cell",
)
async def cancel_cell(cell_id: CellId, request: Request) -> JSONBytes:
    """Abort a cell; answers its final envelope (``failed``, code ``aborted``)."""
    svc, key = _services_and_key(request)
    return JSONBytes(await svc.cells.cancel(cell_id, key.tenant, svc.tracing.parent_from_scope(request.scope)))


@router.get(
    "/v1/cells/{cell_id}",
    response_model=CellEnvelope,
    responses=ERROR_RESPONSES,
    tags=["cells"],
    summary="Cell status",
)
async def cell_status(cell_id: CellId, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    """Status of a cell without resuming it (finished cells: a summary without value or output)."""
    return JSONBytes(svc.cells.status(cell_id, key.tenant))


@router.get(
    "/v1/catalog",
    response_model=CatalogAnswer,
    responses={**ERROR_RESPONSES, 200: _example(CATALOG_EXAMPLE)},
    tags=["tools"],
    summary="Tool catalog and quick index",
)
async def catalog(svc: ServicesDep, key: CallerDep, session_id: CatalogSession = None) -> JSONBytes:
    """Handle metadata of every tool visible to this key, and the quick index for agent prompts.

    The catalog is the key's (its tool policy decides it), the same for every session: ``session_id``
    is checked and accepted, and changes nothing.
    """
    view = svc.view_for(key)
    return JSONBytes({"tools": view.handles(), "quick_index": quick_index(view)})


@router.get(
    "/v1/api/files",
    response_model=ApiFileList,
    responses={**ERROR_RESPONSES, 200: _example(API_LIST_EXAMPLE)},
    tags=["tools"],
    summary="List declaration files",
)
async def api_files(svc: ServicesDep, key: CallerDep, prefix: str | None = None) -> JSONBytes:
    """What ``API.list(prefix)`` returns in a guest of this key."""
    table = await svc.api_table_for(key)
    return JSONBytes(list_api_files(table, prefix))


@router.get(
    "/v1/api/files/{name}",
    response_model=ApiFile,
    responses={**ERROR_RESPONSES, 200: _example({**API_READ_EXAMPLE, "path": "results.d.ts"})},
    tags=["tools"],
    summary="Read a top-level declaration file",
)
async def api_file(name: ApiName, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    """What ``API.read(name)`` returns in a guest of this key (``results.d.ts``)."""
    table = await svc.api_table_for(key)
    return JSONBytes(read_api_file(table, name))


@router.get(
    "/v1/api/files/{dir}/{name}",
    response_model=ApiFile,
    responses={**ERROR_RESPONSES, 200: _example(API_READ_EXAMPLE)},
    tags=["tools"],
    summary="Read a declaration file in a folder",
)
async def api_nested_file(dir: ApiDir, name: ApiName, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    """What ``API.read("<dir>/<name>")`` returns in a guest of this key (``tools/echo.d.ts``, ``mcp/time.d.ts``)."""
    table = await svc.api_table_for(key)
    return JSONBytes(read_api_file(table, f"{dir}/{name}"))


# Any other depth or spelling (an empty segment, a dot segment, three segments) names no file: this
# undocumented fallback answers it like API.read does (422 invalid path, 404 unknown file), as before.
@router.get("/v1/api/files/{path:path}", include_in_schema=False)
async def api_file_any_path(path: str, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    table = await svc.api_table_for(key)
    return JSONBytes(read_api_file(table, path))


@router.delete(
    "/v1/sessions/{session_id}/runs/{run_id}",
    response_model=RunEnded,
    responses={**ERROR_RESPONSES, 200: _example(END_RUN_EXAMPLE)},
    tags=["sessions"],
    summary="End a run",
)
async def end_run(session_id: SessionId, run_id: RunId, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    """End a run: its saved results expire now and its tool-failure counters are forgotten."""
    # A store that fails here is a 503 (error_responses.on_store_error), like every store failure.
    dropped = await svc.results.end_run(ResultScope(key.tenant, session_id, run_id))
    await svc.access.run_counters.delete_run_failures(key.tenant, session_id, run_id)
    return JSONBytes({"session_id": session_id, "run_id": run_id, "expired_results": dropped})


@router.get(
    "/v1/sessions/{session_id}/runs/{run_id}",
    response_model=RunReport,
    responses={**ERROR_RESPONSES, 200: _example(RUN_EXAMPLE)},
    tags=["sessions"],
    summary="Run counters",
)
async def run_status(session_id: SessionId, run_id: RunId, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    """The run's tool-failure counters (per tool, total, blocked tools and why) and its saved results.

    A run nobody used answers zeros: runs are named by the caller and not registered anywhere.
    """
    state = await svc.access.run_counters.run_failures(key.tenant, session_id, run_id)
    count, size = await svc.results.usage(ResultScope(key.tenant, session_id, run_id))
    return JSONBytes(
        {
            "session_id": session_id,
            "run_id": run_id,
            **run_report(state, svc.access.failure_limits),
            "saved_results": {"count": count, "bytes": size},
        }
    )


@router.get(
    "/v1/sessions/{session_id}/store",
    response_model=StoreKeys,
    responses={**ERROR_RESPONSES, 200: _example(STORE_KEYS_EXAMPLE)},
    tags=["sessions"],
    summary="Session store keys",
)
async def session_store(session_id: SessionId, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    """Keys of the session's committed store and their byte sizes."""
    sizes = await _session_store(svc).sizes(key.tenant, session_id)
    sizes.pop(NETWORK_MARK_KEY, None)  # internal provenance mark, not a guest key
    return JSONBytes(
        {
            "session_id": session_id,
            "keys": [{"key": k, "bytes": v} for k, v in sorted(sizes.items())],
            "total_bytes": sum(sizes.values()),
        }
    )


@router.delete(
    "/v1/sessions/{session_id}",
    response_model=SessionDeleted,
    responses={**ERROR_RESPONSES, 200: _example(SESSION_DELETED_EXAMPLE)},
    tags=["sessions"],
    summary="Delete a session",
)
async def delete_session(session_id: SessionId, svc: ServicesDep, key: CallerDep) -> JSONBytes:
    """Delete the session's committed store (running cells keep their own buffered writes)."""
    existed = await _session_store(svc).delete_session(key.tenant, session_id)
    if not existed:
        raise NotFound(f"session {session_id!r} has no stored data")
    return JSONBytes({"session_id": session_id, "deleted": True})


def _session_store(svc: Components) -> SessionStore:
    """The session store (404 on a server without one; while it is down its calls answer 503)."""
    if svc.store is None:
        raise NotFound("this server runs without a session store")
    return svc.store


@router.get(
    "/healthz", response_model=Health, tags=["ops"], summary="Liveness", responses={200: _example(HEALTH_EXAMPLE)}
)
async def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    tags=["ops"],
    summary="Readiness",
    response_model=Readiness,
    # Not ready is the same body with status "unavailable", not an error body.
    responses={200: _example(READY_EXAMPLE), 503: {"model": Readiness, "description": "a part is not ready"}},
)
async def readyz(svc: ServicesDep) -> JSONBytes:
    """The worker pool has workers and the session store answers; ``sandbox``: the workers' confinement layers."""
    checks = await svc.readiness()
    ok = all(v == "ok" for v in checks.values())
    return JSONBytes(
        {"status": "ok" if ok else "unavailable", "checks": checks, "sandbox": svc.sandbox.as_json()},
        status_code=200 if ok else 503,
    )


@router.get(
    "/metrics",
    tags=["ops"],
    summary="Prometheus metrics",
    response_class=PlainTextResponse,
    responses={401: ERROR_RESPONSES[401]},
)
async def metrics(svc: ServicesDep) -> PlainTextResponse:
    """Prometheus text exposition (with ``metrics_require_key``, only for a valid API key)."""
    body, content_type = svc.metrics.render(svc.cells, svc.pool)
    return PlainTextResponse(body, media_type=content_type)
