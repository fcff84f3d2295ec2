"""From a validated request to what the registry runs: one recipe for every face.

The HTTP routes, the MCP facade's tools and the ``codemode exec`` command all build their cell (and
read a wait's answers) here, so limits, the key's tool policy and client tool compilation apply the
same way whichever door a caller uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from service.errors import InvalidRequest
from service.principals import cell_principal
from service.runtime.registry import CellRegistry
from service.runtime.spec import CellSpec
from service.settings import ApiKey

from .keyed_tools import KeyedTools
from .schemas import ClientToolDecl, ExecRequest, WaitRequest, cell_language

M = TypeVar("M", bound=BaseModel)


def parsed(model: type[M], data: Mapping[str, object], where: str = "arguments") -> M:
    """``data`` checked by ``model``; the first problem is an ``invalid_request`` naming its field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]  # a ValidationError has at least one
        field = ".".join(str(p) for p in first["loc"]) or where
        raise InvalidRequest(f"{field}: {first['msg']}", need_param=field) from None


async def cell_spec(cells: CellRegistry, tools: KeyedTools, key: ApiKey, body: ExecRequest) -> CellSpec:
    """The cell ``body`` asks for, run as ``key``'s tenant under its tool policy (422s name the field),
    in a worker process that serves only cells of its principal (``worker_isolation``)."""
    limits = cells.limits(
        timeout_ms=body.timeout_ms,
        memory_limit_bytes=body.memory_limit_bytes,
        max_output_bytes=body.max_output_bytes,
    )
    return CellSpec(
        code=body.code,
        tenant=key.tenant,
        limits=limits,
        title=body.title,
        session_id=body.session_id,
        run_id=body.run_id,
        restart_safe=body.restart_safe,
        headless=body.headless,
        background=body.background,
        call_log=body.call_log,
        # Most cells declare none: no coroutine to run for them.
        client_tools=await tools.access.client_tools([_declaration(t) for t in body.client_tools], key)
        if body.client_tools
        else (),
        tool_policy=tools.policy_for(key),
        require_approval=tuple(body.require_approval),
        language=cell_language(body.language),
        principal=cell_principal(cells.settings.worker_isolation, key, body.session_id),
    )


def wait_answers(body: WaitRequest) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The client tool results and approval answers of a wait, as the registry takes them."""
    # Not model_dump(): it would copy every (possibly megabytes of) result value on the event loop.
    results: list[dict[str, object]] = [
        {"id": r.id, "ok": r.ok, "value": r.value, "error": r.error} for r in body.tool_results
    ]
    approvals: list[dict[str, object]] = [
        {"id": a.id, "approve": a.approve, "reason": a.reason} for a in body.approvals
    ]
    return results, approvals


def _declaration(tool: ClientToolDecl) -> dict[str, object]:
    # Not model_dump(): it would copy the schema, however large, on the event loop before its caps apply.
    fields = {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    return {k: v for k, v in fields.items() if v is not None}
